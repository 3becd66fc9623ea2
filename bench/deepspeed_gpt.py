#!/usr/bin/env python3
"""DeepSpeed side of bench/deepspeed_cpu.sh: the small GPT trained by
deepspeed.initialize on the CPU, one process per rank, timed the way
bench/torch_gpt2.py and dsrun's metrics time a step.

The model is bench/torch_gpt2.py's GPT (nanoGPT, the architecture dsc's gpt2
model matches), imported, not copied. The DeepSpeed config is the very file
dsc compiled its plan from, so micro-batch, clipping, AdamW hyperparameters
and the ZeRO section are the same on both sides. The parameters go in as
nanoGPT's two groups (weight decay on rank >= 2 only), as dsc groups them.

Launch with torchrun from build/venv, DeepSpeed on PYTHONPATH:

    DS_ACCELERATOR=cpu PYTHONPATH=/tmp/dspkgs OMP_NUM_THREADS=1 \
      build/venv/bin/python -m torch.distributed.run --nproc_per_node 2 \
      bench/deepspeed_gpt.py --config ds_config.json --data FILE

Each rank draws its own micro-batches (random windows of the byte file, seed
+ rank). A step is timed on each rank with a plain wall clock, no barrier:
from drawing the batch to loss.item() after engine.step(). Rank 0 prints one
JSON object as the last line of stdout: its median step seconds and every
measured step, tokens/s of the whole job, each rank's peak RSS, the
optimizer DeepSpeed built, and the first steps' loss averaged over ranks.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="DeepSpeed config (JSON)")
    p.add_argument("--data", required=True, help="file read as bytes (tokens 0..255)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--vocab-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads per rank (2 ranks on 2 cores: 1)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--torch-adamw", action="store_true",
                   help="hand DeepSpeed torch.optim.AdamW as the client "
                        "optimizer instead of building the config's AdamW "
                        "(FusedAdam, a JIT-compiled CPU op)")
    p.add_argument("--print-losses", type=int, default=5,
                   help="how many first steps' losses to report")
    return p.parse_args()


args = parse_args()


def current_rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


# torch_gpt2.py parses its own command line when imported; hand it a valid
# one (only --data is required) and restore ours.
sys.path.insert(0, HERE)
saved_argv, sys.argv = sys.argv, [os.path.join(HERE, "torch_gpt2.py"), "--data", args.data]
import torch_gpt2  # noqa: E402
sys.argv = saved_argv

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import deepspeed  # noqa: E402
from deepspeed.accelerator import get_accelerator  # noqa: E402


def param_groups(model, weight_decay):
    # nanoGPT's grouping, which dsc keeps: decay on matrices and embeddings
    # only. parameters() yields the tied wte/lm_head weight once.
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def main():
    torch.set_num_threads(args.threads)
    with open(args.config) as f:
        config = json.load(f)
    opt_params = config["optimizer"]["params"]
    client_opt = None

    deepspeed.init_distributed()  # the accelerator's backend: gloo without oneCCL
    rank, world = dist.get_rank(), dist.get_world_size()
    rss_baseline = current_rss_kib()

    torch.manual_seed(args.seed)  # same initial weights on every rank
    T = args.block_size
    model = torch_gpt2.GPT(args.n_layer, args.n_head, args.n_embd, T, args.vocab_size)
    model.train()
    groups = param_groups(model, opt_params["weight_decay"])
    if args.torch_adamw:
        config = {k: v for k, v in config.items() if k != "optimizer"}
        client_opt = torch.optim.AdamW(groups, lr=opt_params["lr"],
                                       betas=tuple(opt_params["betas"]), eps=opt_params["eps"])
    n_params = sum(p.numel() for p in model.parameters())
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, optimizer=client_opt,
        model_parameters=None if client_opt else groups, config=config)
    # Under ZeRO the engine's optimizer wraps the one doing the update.
    inner = getattr(optimizer, "optimizer", optimizer)

    B = engine.train_micro_batch_size_per_gpu()
    gas = engine.gradient_accumulation_steps()
    data = np.memmap(args.data, dtype=np.uint8, mode="r")
    rng = np.random.default_rng(args.seed + rank)  # each rank its own samples

    def get_batch():
        starts = rng.integers(0, len(data) - T - 1, size=B)
        x = np.stack([data[s:s + T] for s in starts]).astype(np.int64)
        y = np.stack([data[s + 1:s + 1 + T] for s in starts]).astype(np.int64)
        return torch.from_numpy(x), torch.from_numpy(y)

    times, losses = [], []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        total = 0.0
        for _ in range(gas):
            x, y = get_batch()
            loss = engine(x, y)
            engine.backward(loss)
            engine.step()  # applies only at the accumulation boundary
            total += loss.item()
        dt = time.perf_counter() - t0
        losses.append(total / gas)
        if step >= args.warmup:
            times.append(dt)

    # After timing: collectives here cost the measurement nothing.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    per_rank = [None] * world
    dist.all_gather_object(per_rank, {"peak_rss_kib": peak, "rss_baseline_kib": rss_baseline,
                                      "losses": losses, "median_step_s": statistics.median(times)})
    if rank == 0:
        mean_losses = [statistics.fmean(r["losses"][i] for r in per_rank)
                       for i in range(len(losses))]
        med = statistics.median(times)
        print(json.dumps({
            "impl": "deepspeed",
            "deepspeed": deepspeed.__version__,
            "torch": torch.__version__,
            "accelerator": get_accelerator().device_name(),
            "backend": dist.get_backend(),
            "zero_stage": engine.zero_optimization_stage(),
            "optimizer": type(optimizer).__name__,
            "inner_optimizer": type(inner).__module__ + "." + type(inner).__name__,
            "client_optimizer": bool(client_opt),
            "threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "world_size": world,
            "params": n_params,
            "tokens_per_step": B * gas * T * world,
            "warmup": args.warmup,
            "steps": args.steps,
            "median_step_s": med,
            "step_s": times,
            "rank_median_step_s": [r["median_step_s"] for r in per_rank],
            "tokens_per_s": B * gas * T * world / med,
            "first_losses": mean_losses[:args.print_losses],
            "last_loss": mean_losses[-1],
            "peak_rss_kib": [r["peak_rss_kib"] for r in per_rank],
            "rss_baseline_kib": [r["rss_baseline_kib"] for r in per_rank],
        }), flush=True)


if __name__ == "__main__":
    main()
