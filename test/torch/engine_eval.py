"""engine_eval.py DIR: evaluation through dsc.initialize's engine.

engine.eval() (or torch.no_grad()) makes engine(tokens, targets) run the
plan's eval program: dropout off, no gradients. On a model with dropout 0.2
(Inputs/dropout_model.py) its loss equals the module's own in eval mode at the engine's
weights; eval_batch averages the next gradient_accumulation_steps batches;
and a run with an evaluation after every step ends byte-identical to one
without (evaluating changes nothing)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs"))
from dropout_model import DropoutModel  # noqa: E402

import dsc  # noqa: E402

CONFIG = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}}}
T = 32


def batch(i):
    data = batch.data
    rows = torch.stack([data[(4 * i + r) * T:(4 * i + r) * T + T + 1] for r in range(4)])
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


batch.data = torch.tensor(list(open("/usr/share/common-licenses/GPL-3", "rb").read()))


def run(out, evaluate):
    torch.manual_seed(0)
    model = DropoutModel(vocab=256, n=32, p=0.2)
    engine = dsc.initialize(model=model, config=CONFIG, block_size=T)[0]
    for i in range(12):
        loss = engine(*batch(i))
        engine.backward(loss)
        engine.step()
        if evaluate and engine.is_gradient_accumulation_boundary():
            engine.eval()
            engine(*batch(100))
            engine.train()
    engine.export_weights(out)
    return engine


def main(out):
    engine = run(os.path.join(out, "plain.safetensors"), False)
    x, y = batch(100)
    engine.eval()
    mine = engine(x, y).item()
    engine.train()
    with torch.no_grad():
        no_grad = engine(x, y).item()
    module = engine.module.eval()
    with torch.no_grad():
        want = module(x, y).item()
    print(f"eval loss {mine:.6f}, torch.no_grad() {no_grad:.6f}, the module's in eval "
          f"mode {want:.6f}, rel {abs(mine - want) / want:.1e}")
    it = iter([batch(100), batch(101)])
    both = engine.eval_batch(it).item()
    engine.eval()
    second = engine(*batch(101)).item()
    print(f"eval_batch: {both:.6f} = mean of {mine:.6f} and {second:.6f}: "
          f"{abs(both - (mine + second) / 2) < 1e-6}")
    run(os.path.join(out, "evaluated.safetensors"), True)
    same = (open(os.path.join(out, "plain.safetensors"), "rb").read() ==
            open(os.path.join(out, "evaluated.safetensors"), "rb").read())
    print(f"evaluating after every step changes nothing: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
