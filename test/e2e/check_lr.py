#!/usr/bin/env python3
"""check_lr.py GOLDEN.json CASE METRICS.jsonl: dsrun's per-step lr equals
DeepSpeed's (GOLDEN, from deepspeed_lr.py) for CASE at every step, to 1e-12
relative. Prints the steps compared and the largest difference; exit 1 on a
mismatch."""
import json
import sys


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    golden = json.load(open(argv[1]))["cases"][argv[2]]["lr"]
    ours = [json.loads(l)["lr"] for l in open(argv[3]) if l.strip()]
    worst, bad = 0.0, []
    for step, (a, b) in enumerate(zip(ours, golden), 1):
        d = abs(a - b) / max(abs(b), 1e-30) if a != b else 0.0
        worst = max(worst, d)
        if d > 1e-12:
            bad.append(f"step {step}: dsrun {a!r}, DeepSpeed {b!r}")
    print(f"{argv[2]}: {min(len(ours), len(golden))} steps, max rel diff {worst:.1e}")
    for line in bad[:5]:
        print(f"check_lr: {line}")
    return 1 if bad or len(ours) < len(golden) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
