"""engine_ranks.py CONFIG.json OUT.safetensors STEPS: DeepSpeed's loop on
nanoGPT's GPT, run as one rank or as each rank of `dsc-launch --num_gpus
N`. Every step draws one global batch of N x gas micro-batches from the
GPL's bytes; rank k's micro-step m takes micro-batch m * N + k, dsrun's
order, so N ranks with gas micro-steps and one rank with N x gas (the
config's batch triple says which) train on the same samples. N counts
data-parallel replicas (engine.dp_world_size): the ranks of a Ulysses
group feed the same micro-batch, which the engine cuts along the
sequence; a pipeline's stages (engine.is_pipe_parallel()) take each
step's micro-batches at once through engine.train_batch, every rank the
same (after checking that engine() is refused). Rank 0 writes the final
weights (engine.export_weights) and prints its rank count; with several
ranks each compares engine.module with them; one rank and
each rank of a pipeline print the steps' losses. `engine_ranks.py compare A B TOL`: the two weights files' largest
relative difference per tensor, exit 1 above TOL. `engine_ranks.py losses
ONE.out OTHER.out TOL`: every "rank R losses:" line of both outputs
against the first one's, step by step, exit 1 above TOL."""
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import GPT  # noqa: E402

import dsc as deepspeed  # noqa: E402

T = 16


def main(config_path, out, steps):
    config = json.load(open(config_path))
    torch.manual_seed(5)
    model = GPT(n_layer=2, n_head=2, n_embd=32, block_size=T, vocab_size=256, bias=False)
    engine, _, _, _ = deepspeed.initialize(model=model, config=config_path)
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    gas, b = engine.gradient_accumulation_steps(), engine.train_micro_batch_size_per_gpu()
    data = torch.tensor(list(open("/usr/share/common-licenses/GPL-3", "rb").read()))
    # A Ulysses group's ranks share a batch: the data-parallel replicas.
    dp = engine.dp_world_size
    data_rank = rank // (world // dp)
    per_step = dp * gas  # micro-batches in the global batch
    def micro_batch(s, m):
        first = ((s * per_step) + m * dp + data_rank) * b
        rows = torch.stack([data[(first + r) * T:(first + r) * T + T + 1] for r in range(b)])
        return rows[:, :-1], rows[:, 1:]

    losses = []
    if engine.is_pipe_parallel():
        # Every stage takes the step's batches; the loss comes back on all.
        try:
            engine(*micro_batch(0, 0))
        except deepspeed.InputError as e:
            if rank == 0:
                print(f"engine(): {e}")
        for s in range(steps):
            losses.append(float(engine.train_batch(iter([micro_batch(s, m)
                                                         for m in range(gas)]))))
    for s in range(steps if not engine.is_pipe_parallel() else 0):
        step_losses = []
        for m in range(gas):
            loss = engine(*micro_batch(s, m))
            engine.backward(loss)
            engine.step()
            step_losses.append(float(loss))
        losses.append(sum(step_losses) / gas)
    engine.export_weights(out)  # every rank takes part; rank 0 writes
    if world > 1:
        # engine.module on every rank (a collective, like the export: once
        # it returns, rank 0 has written `out`) holds the exported weights.
        from safetensors.torch import load_file
        state, saved = engine.module.state_dict(), load_file(out)
        worst = max((state[k].float() - v).abs().max().item() for k, v in saved.items())
        print(f"rank {rank} module: {len(saved)} tensors, max diff from the export {worst:.1e}")
    if rank == 0:
        print(f"{world} rank(s): {engine.global_steps} steps of {engine.train_batch_size()} "
              f"samples; zero stage {config.get('zero_optimization', {}).get('stage', 0)}")
    if engine.is_pipe_parallel():
        # Each rank's losses: a stage that computes none gets the last's.
        print(f"rank {rank} losses: " + " ".join(f"{v:.6f}" for v in losses))
    elif world == 1:
        print("rank 0 losses: " + " ".join(f"{v:.6f}" for v in losses))
    return 0


def compare(a_path, b_path, tol):
    from safetensors.torch import load_file
    a, b = load_file(a_path), load_file(b_path)
    if sorted(a) != sorted(b):
        print(f"tensors differ: {sorted(set(a) ^ set(b))}")
        return 1
    worst = max(((a[k] - b[k]).double().norm() / a[k].double().norm().clamp_min(1e-30)).item()
                for k in a)
    print(f"{len(a)} tensors: max weight rel diff {worst:.2e}")
    return 0 if worst <= tol else 1


def compare_losses(paths, tol):
    # mpirun forwards each rank's output as it comes: one rank's line can
    # run into another's, so the losses are found wherever they stand.
    runs = []
    for path in paths:
        for found in re.findall(r"rank \d+ losses:((?: -?\d+\.\d{6})+)", open(path).read()):
            runs.append([float(v) for v in found.split()])
    if len(runs) < 2 or any(len(r) != len(runs[0]) for r in runs):
        print(f"losses: {len(runs)} runs of lengths {[len(r) for r in runs]}")
        return 1
    worst = max(abs(v - w) / max(abs(w), 1e-30) for r in runs[1:] for v, w in zip(r, runs[0]))
    print(f"{len(runs)} runs of {len(runs[0])} steps: max loss rel diff {worst:.2e}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    if sys.argv[1] == "losses":
        sys.exit(compare_losses(sys.argv[2:-1], float(sys.argv[-1])))
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
