"""engine.test's errors: each misuse of dsc.initialize's engine prints
`what: message` (dsc.InputError's one line)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import GPT  # noqa: E402

import dsc  # noqa: E402

CONFIG = {"train_micro_batch_size_per_gpu": 4,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}


def expect(what, fn):
    try:
        fn()
    except dsc.InputError as e:
        print(f"{what}: {e}")
        return
    print(f"{what}: no error")


def main():
    model = GPT(n_layer=1, n_head=2, n_embd=32, block_size=32, vocab_size=256)
    engine, _, _, _ = dsc.initialize(model=model, config=CONFIG)
    x = torch.randint(0, 256, (4, 32))
    loss = engine(x, x)
    expect("forward twice", lambda: engine(x, x))
    engine.backward(loss)
    engine.step()
    expect("step first", engine.step)
    expect("wrong shape", lambda: engine(x, x[:, :16]))
    expect("float tokens", lambda: engine(x.float(), x))
    expect("client optimizer", lambda: dsc.initialize(
        model=model, config=CONFIG, optimizer=torch.optim.SGD(model.parameters(), lr=0.1)))
    expect("groups", lambda: dsc.initialize(
        model=model, config=CONFIG,
        model_parameters=[{"params": list(model.parameters()), "lr": 0.1}]))
    expect("half the parameters", lambda: dsc.initialize(
        model=model, config=CONFIG, model_parameters=list(model.parameters())[:3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
