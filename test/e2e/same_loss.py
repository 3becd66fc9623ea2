#!/usr/bin/env python3
"""same_loss.py EVAL.txt METRICS.jsonl: the loss `dsrun --eval-only` printed
("val_loss X over ...", X with 9 significant digits, float's round trip)
equals the first training step's loss in METRICS.jsonl to those digits:
the same batch through the same kernels. Exit 0 when equal, 1 otherwise,
2 on bad arguments."""
import json
import sys


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    words = open(argv[1]).read().split()
    if "val_loss" not in words:
        print(f"{argv[1]}: no val_loss line")
        return 1
    val = words[words.index("val_loss") + 1]
    with open(argv[2]) as f:
        first = json.loads(f.readline())
    train = f"{first['loss']:.9g}"
    print(f"eval {val}, first training step {train}")
    return 0 if val == train else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
