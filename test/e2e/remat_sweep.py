#!/usr/bin/env python3
"""remat_sweep.py DSC MODEL: dsc --remat=auto over a sweep of activation
budgets. Checks that the predicted activation peak never exceeds the budget,
that the recomputed FLOPs never increase as the budget grows, that at the
`layers` policy's own peak auto recomputes no more than `layers`, and that a
budget below the smallest plannable peak is refused with exit status 2 and
one line naming the smallest peak. Prints one line per budget and `ok`;
exit 1 on the first violated property."""
import re
import subprocess
import sys


def report(dsc, model, *flags):
    p = subprocess.run([dsc, "--model", model, "--report", *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"remat_sweep: dsc {' '.join(flags)} failed: {p.stderr.strip()}")
    peak = int(re.search(r"^  activations\s+(\d+) bytes", p.stdout, re.M).group(1))
    m = re.search(r"^remat: (.*), ([0-9.e+-]+) GFLOP recomputed", p.stdout, re.M)
    return peak, float(m.group(2)) * 1e9, m.group(1)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    dsc, model = argv[1:]
    none_peak, _, _ = report(dsc, model)
    layers_peak, layers_flops, _ = report(dsc, model, "--remat=layers")
    min_peak, _, min_name = report(dsc, model, "--remat=auto")
    print(f"none {none_peak} layers {layers_peak} smallest {min_peak} ({min_name})")
    if not min_peak <= layers_peak < none_peak:
        print("remat_sweep: expected smallest <= layers < none")
        return 1
    budgets = sorted({min_peak + (none_peak - min_peak) * k // 8 for k in range(9)}
                     | {layers_peak, none_peak * 2})
    last = None
    for b in budgets:
        peak, flops, name = report(dsc, model, "--remat=auto",
                                   f"--activation-memory={b}")
        print(f"budget {b}: peak {peak} recomputed {flops:.6g} FLOP ({name})")
        if peak > b:
            print(f"remat_sweep: peak {peak} over the budget {b}")
            return 1
        if last is not None and flops > last:
            print(f"remat_sweep: budget {b} recomputes more than a smaller one")
            return 1
        last = flops
        if b == layers_peak and flops > layers_flops:
            print(f"remat_sweep: at layers' peak auto recomputes {flops:.6g} "
                  f"> layers' {layers_flops:.6g}")
            return 1
        if b == none_peak * 2 and flops != 0:
            print("remat_sweep: an ample budget still recomputes")
            return 1
    p = subprocess.run([dsc, "--model", model, "--remat=auto",
                        f"--activation-memory={min_peak - 1}", "-o", "/dev/null"],
                       capture_output=True, text=True)
    print(f"infeasible: exit {p.returncode}: {p.stderr.strip()}")
    want = (f"activation-memory = {min_peak - 1} bytes is infeasible: the "
            f"smallest activation peak dsc can plan is {min_peak} bytes")
    if p.returncode != 2 or want not in p.stderr or p.stderr.count("\n") != 1:
        print("remat_sweep: wrong refusal of an infeasible budget")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
