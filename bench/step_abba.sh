#!/usr/bin/env bash
# One training step's time and peak RSS, two builds against each other:
#
#   bash bench/step_abba.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]
#
# Each build's own dsc compiles the benchmark plan of bench/gpt2_cpu.sh
# (gpt2 n_layer=4 n_head=4 n_embd=256 block_size=128, micro-batch 8, AdamW,
# clipping 1.0: plans of different schema versions cannot be shared), then
# the two dsruns train it 30 steps on 4 MB of seeded random bytes in ABBA
# order (old, new, new, old, ...: on this shared machine the second of two
# back-to-back runs is measurably slower, so plain alternation is biased),
# ROUNDS times (default 2). Prints each run's median step_s over steps 6-30
# and its peak RSS, and the medians per build. Holds $DSC_BENCH_LOCK.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

old=${1:?old build dir}
new=${2:?new build dir}
rounds=${3:-2}
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat > "$out/ds_config.json" <<'JSON'
{
  "train_micro_batch_size_per_gpu": 8,
  "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW",
                "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                           "weight_decay": 0.1}}
}
JSON
"$py" -c "import random,sys; random.seed(1337); sys.stdout.buffer.write(random.randbytes(4_000_000))" > "$out/data.bytes"
model=gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0
for side in old new; do
  dir=${!side}
  "$dir/tools/dsc" --model "$model" --config "$out/ds_config.json" -o "$out/$side.dsplan"
done

run() { # run SIDE INDEX
  local side=$1 i=$2 dir
  dir=${!side}
  /usr/bin/time -f "%M" -o "$out/$side.$i.rss" "$dir/tools/dsrun" "$out/$side.dsplan" \
    --data "$out/data.bytes" --steps 30 --metrics "$out/$side.$i.jsonl" > /dev/null 2>&1
}
i=0
for _ in $(seq "$rounds"); do
  for side in old new new old; do
    i=$((i + 1))
    run "$side" "$i"
  done
done

"$py" - "$out" "$old" "$new" <<'PY'
import glob, json, os, statistics, sys
out, old, new = sys.argv[1:4]
print("| dsrun | median step per run (ms) | median | peak RSS |")
print("|---|---|---|---|")
for side, name in (("old", old), ("new", new)):
    medians, rss = [], []
    runs = sorted(glob.glob(os.path.join(out, side + ".*.jsonl")),
                  key=lambda p: int(p.split(".")[-2]))
    for path in runs:
        steps = [json.loads(l) for l in open(path) if l.strip()]
        times = [s["step_s"] for s in steps if "step_s" in s and s.get("step", 0) > 5]
        medians.append(1000 * statistics.median(times))
        rss.append(int(open(path[:-len("jsonl")] + "rss").read()) / 1024)
    print(f"| {name} | {', '.join(f'{m:.1f}' for m in medians)} | "
          f"{statistics.median(medians):.1f} | {max(rss):.1f} MiB |")
PY
