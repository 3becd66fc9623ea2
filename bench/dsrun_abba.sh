#!/usr/bin/env bash
# Two dsrun binaries against each other, ABBA:
#
#   bash bench/dsrun_abba.sh OLD_DSRUN NEW_DSRUN PLAN [STEPS] [ROUNDS]
#
# For a runtime-only change both train PLAN; NEW_PLAN=FILE gives the new
# binary its own (bench/step_abba.sh: each build compiles its plan, as plans
# of different schema versions cannot be shared). Keep the old binary first
# (cp build/tools/dsrun /tmp/dsrun-old before the change); a wrapper script
# that sets an environment variable and execs dsrun compares two settings.
# Trains STEPS steps (default 20) on 4 MB of seeded random bytes in ABBA
# order (old, new, new, old: the second of two back-to-back runs is
# measurably slower on a shared machine), ROUNDS times (default 3), and
# prints each run's median step_s after its first SKIP steps (default 3),
# the median per binary and the largest peak RSS. Holds $DSC_BENCH_LOCK.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

old=${1:?old dsrun}
new=${2:?new dsrun}
old_plan=${3:?plan}
new_plan=${NEW_PLAN:-$old_plan}
steps=${4:-20}
rounds=${5:-3}
skip=${SKIP:-3}
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" -c "import random,sys; random.seed(1337); sys.stdout.buffer.write(random.randbytes(4_000_000))" > "$out/data.bytes"

i=0
for _ in $(seq "$rounds"); do
  for side in old new new old; do
    i=$((i + 1))
    plan=${side}_plan
    /usr/bin/time -f "%M" -o "$out/$side.$i.rss" "${!side}" "${!plan}" \
      --data "$out/data.bytes" --steps "$steps" \
      --metrics "$out/$side.$i.jsonl" > /dev/null 2>&1
  done
done

"$py" - "$out" "$old" "$new" "$skip" <<'PY'
import glob, json, os, statistics, sys
out, old, new, skip = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
print("| dsrun | median step per run (ms) | median | peak RSS |")
print("|---|---|---|---|")
for side, name in (("old", old), ("new", new)):
    runs = sorted(glob.glob(os.path.join(out, side + ".*.jsonl")),
                  key=lambda p: int(p.split(".")[-2]))
    medians, rss = [], []
    for path in runs:
        steps = [json.loads(l) for l in open(path) if l.strip()]
        times = [s["step_s"] for s in steps if "step_s" in s and s.get("step", 0) > skip]
        medians.append(1000 * statistics.median(times))
        rss.append(int(open(path[:-len("jsonl")] + "rss").read()) / 1024)
    print(f"| {name} | {', '.join(f'{m:.1f}' for m in medians)} | "
          f"{statistics.median(medians):.1f} | {max(rss):.1f} MiB |")
PY
