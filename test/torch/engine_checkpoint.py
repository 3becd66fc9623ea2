"""engine_checkpoint.py DIR: dsc.initialize's save_checkpoint and
load_checkpoint resume a run bitwise.

Ten optimizer steps straight, against five steps, save_checkpoint, a new
engine (a module with other weights) that loads it, and five more steps:
the final weights files are byte-identical. Also: client_state comes back,
the counters continue, an empty directory loads nothing (DeepSpeed's
(None, None)), and saving in the middle of a step or under a tag of one's
own is one line.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import GPT  # noqa: E402

import dsc  # noqa: E402

CONFIG = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
          "gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}},
          "scheduler": {"type": "WarmupLR", "params": {
              "warmup_min_lr": 0, "warmup_max_lr": 3e-3, "warmup_num_steps": 5}}}
T = 32


def batches():
    data = torch.tensor(list(open("/usr/share/common-licenses/GPL-3", "rb").read()))
    rows = [data[i * T:i * T + T + 1] for i in range(160)]
    return [(torch.stack(rows[4 * j:4 * j + 4])[:, :-1], torch.stack(rows[4 * j:4 * j + 4])[:, 1:])
            for j in range(40)]


def engine(seed):
    torch.manual_seed(seed)
    model = GPT(n_layer=2, n_head=2, n_embd=32, block_size=T, vocab_size=256)
    return dsc.initialize(model=model, config=CONFIG)[0]


def train(e, data, first, last):
    for x, y in data[2 * first:2 * last]:
        loss = e(x, y)
        e.backward(loss)
        e.step()


def expect(what, fn):
    try:
        fn()
        print(f"{what}: no error")
    except dsc.InputError as err:
        print(f"{what}: {err}")


def main(out):
    # In the order printed: dsc's notes and warnings go to stderr, these
    # lines to stdout, and the test reads both as one stream.
    sys.stdout.reconfigure(line_buffering=True)
    data = batches()
    straight = engine(0)
    train(straight, data, 0, 10)
    straight.export_weights(os.path.join(out, "straight.safetensors"))

    first = engine(0)
    train(first, data, 0, 5)
    first.save_checkpoint(os.path.join(out, "ck"), client_state={"epoch": 3})
    second = engine(1)
    path, state = second.load_checkpoint(os.path.join(out, "ck"))
    print(f"loaded {os.path.basename(path)}: client_state {state}, global_steps "
          f"{second.global_steps}, global_samples {second.global_samples}, "
          f"next lr {second.get_lr()[0]:g}")
    train(second, data, 5, 10)
    second.export_weights(os.path.join(out, "resumed.safetensors"))
    same = (open(os.path.join(out, "straight.safetensors"), "rb").read() ==
            open(os.path.join(out, "resumed.safetensors"), "rb").read())
    print(f"resumed run's weights byte-identical to the straight run's: {same}")

    os.makedirs(os.path.join(out, "empty"))
    print(f"empty directory: {engine(0).load_checkpoint(os.path.join(out, 'empty'))}")
    x, y = data[0]
    second.backward(second(x, y))
    second.step()
    expect("mid-step save", lambda: second.save_checkpoint(os.path.join(out, "ck")))
    expect("own tag", lambda: first.save_checkpoint(os.path.join(out, "ck"), tag="best"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
