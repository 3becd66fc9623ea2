#!/usr/bin/env bash
# Two dsrun binaries on one plan, for a runtime-only change (the plan is
# the same either way):
#
#   bash bench/dsrun_abba.sh OLD_DSRUN NEW_DSRUN PLAN [STEPS] [ROUNDS]
#
# Keep the old binary first (cp build/tools/dsrun /tmp/dsrun-old before
# the change). Trains PLAN STEPS steps (default 20) on 4 MB of seeded
# random bytes in ABBA order (old, new, new, old: the second of two
# back-to-back runs is measurably slower on a shared machine), ROUNDS times
# (default 3), and prints each run's median step_s after its first 3
# steps and the median per binary. Holds $DSC_BENCH_LOCK.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

old=${1:?old dsrun}
new=${2:?new dsrun}
plan=${3:?plan}
steps=${4:-20}
rounds=${5:-3}
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" -c "import random,sys; random.seed(1337); sys.stdout.buffer.write(random.randbytes(4_000_000))" > "$out/data.bytes"

i=0
for _ in $(seq "$rounds"); do
  for side in old new new old; do
    i=$((i + 1))
    "${!side}" "$plan" --data "$out/data.bytes" --steps "$steps" \
      --metrics "$out/$side.$i.jsonl" > /dev/null 2>&1
  done
done

"$py" - "$out" "$old" "$new" <<'PY'
import glob, json, os, statistics, sys
out, old, new = sys.argv[1:4]
print("| dsrun | median step per run (ms) | median |")
print("|---|---|---|")
for side, name in (("old", old), ("new", new)):
    runs = sorted(glob.glob(os.path.join(out, side + ".*.jsonl")),
                  key=lambda p: int(p.split(".")[-2]))
    medians = []
    for path in runs:
        steps = [json.loads(l) for l in open(path) if l.strip()]
        times = [s["step_s"] for s in steps if "step_s" in s and s.get("step", 0) > 3]
        medians.append(1000 * statistics.median(times))
    print(f"| {name} | {', '.join(f'{m:.1f}' for m in medians)} | "
          f"{statistics.median(medians):.1f} |")
PY
