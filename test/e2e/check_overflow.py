#!/usr/bin/env python3
"""check_overflow.py RUN.jsonl SKIPPED SCALES A B RANKS: a mixed-precision run
with injected overflows (dsrun --debug-overflow-at) did what DeepSpeed does.

SKIPPED: the steps that must be skipped ("5,6,7"), every other step applied.
SCALES: the loss scale each step used ("65536*6,32768": VALUE*COUNT repeats).
A, B: --dump-state prefixes of a run stopped before the first overflow and
of this run; every tensor of every rank (A.rankR.safetensors, R < RANKS)
must be bitwise equal, and so must A.safetensors and B.safetensors (the
exported fp32 master weights). Each rank's metrics must pass
run_checks.check_run. Exit 0 when all holds, 1 otherwise, 2 on bad
arguments.

--stale-accumulators (first): leave the gradient accumulators (NAME.grad)
out of the comparison. With one micro-step a step, dsc stores each
gradient into its accumulator instead of adding it to zeros
(ds-store-gradients), so after a step the accumulators hold that step's
gradient, the overflowed one too, and the next micro-step overwrites them
before anything reads them: they are not state a skipped step keeps."""
import struct
import sys

import safetensors_io as st
from run_checks import check_run


def parse_steps(text):
    return {int(s) for s in text.split(",") if s}


def parse_scales(text):
    out = []
    for item in text.split(","):
        value, _, count = item.partition("*")
        out += [float(value)] * int(count or 1)
    return out


def bits(values):
    # Bitwise: compare the f32 encodings, so -0.0 and NaN payloads count.
    return struct.pack(f"<{len(values)}f", *values)


def is_accumulator(name):
    return name.endswith(".grad")


def same_tensors(path_a, path_b, problems, stale_accumulators):
    try:
        a, b = st.read(path_a), st.read(path_b)
    except (OSError, ValueError, st.FormatError) as e:
        problems.append(str(e))
        return 0
    if sorted(a) != sorted(b) or not a:
        problems.append(f"{path_a} and {path_b} hold different tensors")
        return 0
    names = [n for n in sorted(a) if not (stale_accumulators and is_accumulator(n))]
    for name in names:
        if (a[name].dtype, a[name].shape) != (b[name].dtype, b[name].shape):
            problems.append(f"{name}: {a[name].dtype} {a[name].shape} vs "
                            f"{b[name].dtype} {b[name].shape}")
        elif bits(a[name].values) != bits(b[name].values):
            problems.append(f"{path_b}: {name} changed")
    return len(names)


def main(argv):
    stale_accumulators = len(argv) > 1 and argv[1] == "--stale-accumulators"
    if stale_accumulators:
        argv = argv[:1] + argv[2:]
    if len(argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    metrics, a, b = argv[1], argv[4], argv[5]
    skipped, scales, ranks = parse_steps(argv[2]), parse_scales(argv[3]), int(argv[6])
    records, problems = check_run(metrics, len(scales))
    got_skipped = {r["step"] for r in records if r.get("skipped") is True}
    if got_skipped != skipped:
        problems.append(f"skipped steps {sorted(got_skipped)}, expected "
                        f"{sorted(skipped)}")
    got_scales = [r.get("loss_scale") for r in records]
    if got_scales != scales:
        problems.append(f"loss scales {got_scales}, expected {scales}")
    tensors = same_tensors(a + ".safetensors", b + ".safetensors", problems,
                           stale_accumulators)
    for rank in range(ranks):
        tensors += same_tensors(f"{a}.rank{rank}.safetensors",
                                f"{b}.rank{rank}.safetensors", problems,
                                stale_accumulators)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"{len(records)} steps, skipped {sorted(skipped)}, "
          f"{tensors} tensors bitwise unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
