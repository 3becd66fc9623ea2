#!/usr/bin/env python3
"""val_vs_torch.py MODEL WEIGHTS DATA MICRO_BATCH BATCHES SEED DSRUN_OUT:
the held-out loss `dsrun --eval-only --eval-data DATA --eval-batches
BATCHES --seed SEED` printed (DSRUN_OUT) equals PyTorch's mean loss of the
same weights (torch_models, float64) on the same batches, relative 1e-5.
The batches are drawn as runtime/data/DataLoader.cpp states it: batch b is
the key (SEED, step 0, micro-batch b, rank 0, world 1); row r starts at
((hi << 32 | lo) * (n - T)) >> 64 with lo, hi the Philox words 2s and
2s + 1 of stream FNV-1a("dsrun.data") for sample s = b * MICRO_BATCH + r
(philox.py). Exit 0 when within 1e-5, 1 otherwise, 2 on bad arguments."""
import sys

import numpy as np
import torch

import philox
import safetensors_io as st
import torch_models


def fnv1a(name):
    h = 2166136261
    for c in name.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def main(argv):
    if len(argv) != 8:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    spec, weights, data = argv[1], argv[2], open(argv[3], "rb").read()
    micro, batches, seed = int(argv[4]), int(argv[5]), int(argv[6])
    words = open(argv[7]).read().split()
    got = float(words[words.index("val_loss") + 1])
    block = int(torch_models.options(spec)["block_size"])
    model = torch_models.build(spec)
    state = {k: torch.tensor(v.values, dtype=torch.float32).view(v.shape)
             for k, v in st.read(weights).items()}
    model.load_state_dict(state, strict=True)
    model = model.double().eval()
    stream, starts = fnv1a("dsrun.data"), len(data) - block
    total = 0.0
    with torch.no_grad():
        for b in range(batches):
            samples = np.arange(b * micro, (b + 1) * micro, dtype=np.uint64)
            lo = philox.philox_bits(seed, stream, 0, 2 * samples)
            hi = philox.philox_bits(seed, stream, 0, 2 * samples + np.uint64(1))
            rows = [(int(h) << 32 | int(l)) * starts >> 64 for l, h in zip(lo, hi)]
            idx = torch.tensor([list(data[s:s + block]) for s in rows])
            tgt = torch.tensor([list(data[s + 1:s + block + 1]) for s in rows])
            total += float(model(idx, tgt))
    want = total / batches
    rel = abs(got - want) / abs(want)
    print(f"dsrun val_loss {got:.7f}, torch {want:.7f} (rel {rel:.1e})")
    return 0 if rel <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
