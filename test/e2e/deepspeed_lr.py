#!/usr/bin/env python3
"""deepspeed_lr.py OUT.json: the learning rate DeepSpeed's own schedulers
(the `deepspeed` package's runtime/lr_schedules.py) give each of the first
30 optimizer steps, for the ds_config "scheduler" sections of CASES, the
way DeepSpeed's engine steps them (the optimizer step uses the current lr,
then scheduler.step()), and the betas OneCycle's cycle_momentum sets.
Writes {"deepspeed": VERSION, "cases": {name: {"config": {...}, "lr":
[...], "betas": [[beta1, beta2], ...] (cycle_momentum only)}}}: the
golden file of lr-deepspeed.test, Inputs/deepspeed-lr.json. Needs torch and deepspeed (pip install
deepspeed); the test itself does not."""
import json
import sys

CASES = {
    "WarmupLR": {"type": "WarmupLR", "params": {
        "warmup_min_lr": 0.0, "warmup_max_lr": 1e-3, "warmup_num_steps": 10}},
    "WarmupDecayLR": {"type": "WarmupDecayLR", "params": {
        "warmup_min_lr": 1e-5, "warmup_max_lr": 1e-3, "warmup_num_steps": 10,
        "total_num_steps": 30, "warmup_type": "linear"}},
    "WarmupCosineLR": {"type": "WarmupCosineLR", "params": {
        "warmup_min_ratio": 0.1, "warmup_num_steps": 10,
        "total_num_steps": 30, "cos_min_ratio": 0.05}},
    "LRRangeTest": {"type": "LRRangeTest", "params": {
        "lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 5,
        "lr_range_test_step_rate": 2.0}},
    "LRRangeTestStaircase": {"type": "LRRangeTest", "params": {
        "lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 4,
        "lr_range_test_step_rate": 0.5, "lr_range_test_staircase": True}},
    "OneCycle": {"type": "OneCycle", "params": {
        "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_first_step_size": 8,
        "cycle_second_step_size": 6, "decay_lr_rate": 0.5,
        "decay_step_size": 3, "cycle_momentum": False}},
    "OneCycleStairs": {"type": "OneCycle", "params": {
        "cycle_min_lr": 1e-5, "cycle_max_lr": 2e-3, "cycle_first_step_size": 10,
        "cycle_first_stair_count": 4, "cycle_second_stair_count": 3,
        "cycle_momentum": False}},
    # cycle_momentum (DeepSpeed's default): the optimizer's betas move too.
    "OneCycleMomentum": {"type": "OneCycle", "params": {
        "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_first_step_size": 8,
        "cycle_second_step_size": 6, "decay_lr_rate": 0.5,
        "decay_step_size": 3, "cycle_min_mom": 0.85, "cycle_max_mom": 0.95,
        "decay_mom_rate": 0.01}},
    "OneCycleMomentumStairs": {"type": "OneCycle", "params": {
        "cycle_min_lr": 1e-5, "cycle_max_lr": 2e-3, "cycle_first_step_size": 10,
        "cycle_first_stair_count": 4, "cycle_second_stair_count": 3}},
}
OPTIMIZER_LR = 1e-3
STEPS = 30


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    import torch
    import deepspeed
    from deepspeed.runtime import lr_schedules
    out = {"deepspeed": deepspeed.__version__, "optimizer_lr": OPTIMIZER_LR,
           "cases": {}}
    for name, section in CASES.items():
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.AdamW([p], lr=OPTIMIZER_LR)
        sched = getattr(lr_schedules, section["type"])(opt, **section["params"])
        lrs, betas = [], []
        for _ in range(STEPS):
            lrs.append(opt.param_groups[0]["lr"])
            betas.append(list(opt.param_groups[0]["betas"]))
            opt.step()
            sched.step()
        out["cases"][name] = {"config": section, "lr": lrs}
        if (section["type"] == "OneCycle"
                and section["params"].get("cycle_momentum", True)):
            out["cases"][name]["betas"] = betas
    with open(argv[1], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
