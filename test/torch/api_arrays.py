"""dsc.train's data as arrays: the same tokens as a path (.bin), a numpy
array, a numpy memmap of the .bin file and a torch tensor train to the same
losses; a float array is dsc.InputError naming the argument.
    api_arrays.py WORKDIR
"""
import os
import sys

import numpy as np
import torch

import dsc
from nanogpt_model import GPT


def main(work):
    tokens = (np.arange(5000) * 7919 % 256).astype(np.uint16)
    path = os.path.join(work, "tokens.bin")
    tokens.tofile(path)
    torch.manual_seed(0)
    model = GPT(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=256)
    plan = dsc.compile(model, {"train_micro_batch_size_per_gpu": 2})

    def losses(data):
        run = dsc.train(plan, data, 4, monitor=False, quiet=True)
        return [r["loss"] for r in run.history]

    want = losses(path)
    memmap = np.memmap(path, dtype=np.uint16, mode="r")
    for name, data in (("numpy int64", tokens.astype(np.int64).reshape(50, 100)),
                       ("memmap", memmap),
                       ("torch", torch.from_numpy(tokens.astype(np.int32)))):
        got = losses(data)
        print(f"{name}: {'same' if got == want else 'DIFFERENT'} losses")
    try:
        dsc.train(plan, np.zeros(100, np.float32), 1, monitor=False, quiet=True)
    except dsc.InputError as e:
        print(f"floats: {e}")


if __name__ == "__main__":
    main(sys.argv[1])
