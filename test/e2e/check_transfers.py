#!/usr/bin/env python3
"""check_transfers.py STEP TRACE.json...: the ranks' dsrun traces share
one clock. Every pipeline transfer of the step (a comm.send on one rank
and the comm.recv of the same micro-batch and part on another, both
tagged by dsc) must end its receive no earlier than its send began: a
rank whose clock ran from its own start, or a trace that mislabelled its
transfers, breaks that. Prints the number of transfers; exit 1 with one
line per transfer out of order or unmatched, 2 on bad arguments."""
import json
import sys


def transfers(path, step):
    with open(path) as f:
        events = json.load(f)
    out = {"comm.send": {}, "comm.recv": {}}
    for e in events:
        args = e.get("args", {}) if isinstance(e, dict) else {}
        kind = out.get(e.get("name")) if isinstance(e, dict) else None
        if kind is None or args.get("step") != step:
            continue
        key = (args.get("part"), args.get("micro_batch"), args.get("loc"))
        kind.setdefault(key, []).append((e["ts"], e["ts"] + e["dur"]))
    return out


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    step = int(argv[1])
    ranks = [transfers(p, step) for p in argv[2:]]
    sends = {}
    for r, t in enumerate(ranks):
        for key, times in t["comm.send"].items():
            sends.setdefault(key, []).extend((r, b, e) for b, e in times)
    problems, count = [], 0
    for r, t in enumerate(ranks):
        for key, times in t["comm.recv"].items():
            peers = [s for s in sends.get(key, []) if s[0] != r]
            if len(peers) != len(times):
                problems.append(f"rank {r}: {len(times)} receives of {key}, "
                                f"{len(peers)} sends")
                continue
            for (_, sent, _), (_, received) in zip(sorted(peers, key=lambda s: s[1]),
                                                  sorted(times)):
                count += 1
                if received < sent:
                    problems.append(f"rank {r}: {key} received at {received} us, "
                                    f"sent at {sent} us")
    for p in problems:
        print(p)
    if not problems:
        print(f"{count} transfers, each received after it was sent")
    return 1 if problems or not count else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
