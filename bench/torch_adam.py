#!/usr/bin/env python3
"""torch_adam.py [ELEMENTS...]: PyTorch's CPU AdamW on one flat fp32 tensor
of each size (default 1M, 16M, 128M), the same hyper-parameters and
protocol as dsc-bench-adam (best of 5 steps after a warm-up): single-tensor
(foreach=False) and multi-tensor (foreach=True) torch.optim.AdamW, and
DeepSpeed's DeepSpeedCPUAdam when the deepspeed package imports and builds
its extension here. One JSON line per (implementation, size); an
implementation that cannot run prints one line saying why."""
import json
import os
import sys
import time

import torch


def best_of(step, reps=6):
    best = float("inf")
    for r in range(reps):
        t0 = time.perf_counter()
        step()
        s = time.perf_counter() - t0
        if r > 0:
            best = min(best, s)
    return best


def flat(n, first, step):
    return (first + step * (torch.arange(n) % 1024)).float()


def torch_adamw(n, foreach):
    p = torch.nn.Parameter(flat(n, 0.5, 1e-4))
    p.grad = flat(n, -0.01, 2e-5)
    opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01, foreach=foreach)
    return best_of(opt.step)


def deepspeed_adam(n):
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    p = torch.nn.Parameter(flat(n, 0.5, 1e-4))
    p.grad = flat(n, -0.01, 2e-5)
    opt = DeepSpeedCPUAdam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                           weight_decay=0.01, adamw_mode=True)
    return best_of(opt.step)


def main():
    # The same threads as dsc-bench-adam (bench/cpu_adam.sh sets both).
    if os.environ.get("DSC_CPU_THREADS"):
        torch.set_num_threads(int(os.environ["DSC_CPU_THREADS"]))
    sizes = [int(a) for a in sys.argv[1:]] or [1 << 20, 16 << 20, 128 << 20]
    impls = [("torch AdamW foreach=False", lambda n: torch_adamw(n, False)),
             ("torch AdamW foreach=True", lambda n: torch_adamw(n, True)),
             ("DeepSpeedCPUAdam", deepspeed_adam)]
    for name, run in impls:
        for n in sizes:
            try:
                s = run(n)
            except Exception as e:  # deepspeed missing or not buildable
                print(json.dumps({"impl": name, "error": str(e).splitlines()[0]
                                  if str(e) else type(e).__name__}))
                break
            print(json.dumps({"impl": name, "elements": n, "seconds": s,
                              "elements_per_s": n / s,
                              "threads": torch.get_num_threads(),
                              "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
