#!/usr/bin/env python3
"""check_lr.py GOLDEN.json CASE METRICS.jsonl: dsrun's per-step lr equals
DeepSpeed's (GOLDEN, from deepspeed_lr.py) for CASE at every step, to 1e-12
relative, and so does beta1 where DeepSpeed's OneCycle cycles the momentum
(dsrun's metrics then carry "beta1"; DeepSpeed's beta2 is printed, the value
dsc compiles in). Prints the steps compared and the largest difference;
exit 1 on a mismatch."""
import json
import sys


def compare(name, ours, golden, bad):
    worst = 0.0
    for step, (a, b) in enumerate(zip(ours, golden), 1):
        d = abs(a - b) / max(abs(b), 1e-30) if a != b else 0.0
        worst = max(worst, d)
        if d > 1e-12:
            bad.append(f"step {step}: {name} dsrun {a!r}, DeepSpeed {b!r}")
    return worst


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    case = json.load(open(argv[1]))["cases"][argv[2]]
    records = [json.loads(l) for l in open(argv[3]) if l.strip()]
    bad = []
    worst = compare("lr", [r["lr"] for r in records], case["lr"], bad)
    line = f"{argv[2]}: {min(len(records), len(case['lr']))} steps, max rel diff {worst:.1e}"
    betas = case.get("betas")
    if betas:
        if any("beta1" not in r for r in records):
            bad.append("dsrun's metrics have no beta1: the momentum is not cycled")
        else:
            worst = compare("beta1", [r["beta1"] for r in records],
                            [b[0] for b in betas], bad)
            line += f"; beta1 {betas[0][0]:g} .. {betas[-1][0]:.4f}, max rel diff {worst:.1e}"
        line += f"; DeepSpeed's beta2 {sorted(set(b[1] for b in betas))}"
    elif any("beta1" in r for r in records):
        bad.append("dsrun's metrics have beta1, DeepSpeed does not cycle it")
    print(line)
    for msg in bad[:5]:
        print(f"check_lr: {msg}")
    return 1 if bad or len(records) < len(case["lr"]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
