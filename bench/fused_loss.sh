#!/usr/bin/env bash
# The fused LM head and loss (ds.linear_cross_entropy, phase fused) against
# the five ops it replaces, dsc --fuse-lm-head=false, on GPT-2 124M (vocab
# 50257, T = 1024, AdamW, fp32, one rank):
#   1. the activation peak dsc --report predicts for micro-batches 1 and
#      8, each against the same model with vocab_size=256, so the
#      vocabulary's share of the peak (the loss region) shows;
#   2. the step time, ABBA (fused, unfused, unfused, fused, ...) ROUNDS
#      times (default 2) of STEPS steps (default 4) at micro-batch MB
#      (default 1) on a text file, each run's median step_s over steps 2..
#      and its peak resident set from the run's summary.
#   3. with CHUNKS set (e.g. "64 128 256 512 1024"), a sweep of the fused
#      head's chunk rows against the unfused plan (below).
# PRECISION=bf16 (or fp16) runs both parts in that mixed precision (a
# 16-bit head fuses only where that holds less memory: from micro-batch 2
# on for this model, so MB=2 there).
#
#   bash bench/fused_loss.sh [OUT_DIR]
#
# Builds nothing; holds $DSC_BENCH_LOCK (lock.sh).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-fused-loss-bench}
rounds=${ROUNDS:-2}
steps=${STEPS:-4}
timed_mb=${MB:-1}
precision=${PRECISION:-fp32}
mixed=
[ "$precision" = fp32 ] || mixed=", \"$precision\": {\"enabled\": true}"
data=${DATA:-/usr/share/common-licenses/GPL-3}
mkdir -p "$out"
dsc=$build/tools/dsc dsrun=$build/tools/dsrun

echo "activation peak (dsc --report), MiB:"
printf '%-12s %10s %10s %10s %10s %14s %14s\n' micro-batch unfused fused \
  "V=256" "" "vocab share" "(unfused)"
for mb in $(printf '%s\n' 1 8 "$timed_mb" | sort -nu); do
  echo "{\"train_micro_batch_size_per_gpu\": $mb, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}}$mixed}" > "$out/mb$mb.json"
  peak() { # peak MODEL FLAG: the report's activations in MiB
    "$dsc" --model "$1" --config "$out/mb$mb.json" --fuse-lm-head="$2" --report |
      awk '$1 == "activations" { printf "%.1f", $2 / 1048576; exit }'
  }
  u=$(peak gpt2 false) f=$(peak gpt2 true) small=$(peak gpt2:vocab_size=256 true)
  python3 -c "u, f, s = $u, $f, $small; print(f'{$mb:<12} {u:10.1f} {f:10.1f} {s:10.1f} {\"\":10} {f - s:8.1f} ({100 * (f - s) / (u - s):.1f}%) {u - s:8.1f}')"
done

echo "step time at micro-batch $timed_mb, $precision (ABBA, $rounds rounds of $steps steps):"
"$dsc" --model gpt2 --config "$out/mb$timed_mb.json" -o "$out/fused.dsplan"
"$dsc" --model gpt2 --config "$out/mb$timed_mb.json" --fuse-lm-head=false -o "$out/unfused.dsplan"
order=()
for ((r = 0; r < rounds; ++r)); do
  if ((r % 2 == 0)); then order+=(fused unfused); else order+=(unfused fused); fi
done
i=0
for side in "${order[@]}"; do
  "$dsrun" "$out/$side.dsplan" --data "$data" --steps "$steps" \
    --metrics "$out/$side.$i.jsonl" > "$out/$side.$i.out"
  i=$((i + 1))
done
python3 - "$out" "${order[@]}" <<'PY'
import json, re, statistics, sys
out, order = sys.argv[1], sys.argv[2:]
runs = {"fused": [], "unfused": []}
for i, side in enumerate(order):
    rows = [json.loads(l) for l in open(f"{out}/{side}.{i}.jsonl")][1:]
    step = statistics.median(r["step_s"] for r in rows)
    text = open(f"{out}/{side}.{i}.out").read()
    peak = re.search(r"process peak resident ([0-9.]+ [KMG]iB)", text).group(1)
    runs[side].append(step)
    print(f"  {side:8} run {i}: median step {step:.3f} s, peak resident {peak}")
f, u = statistics.median(runs["fused"]), statistics.median(runs["unfused"])
print(f"  median: fused {f:.3f} s, unfused {u:.3f} s, fused / unfused {f / u:.3f}")
PY

# CHUNKS="64 128 ...": the chunk sweep (dsc --lm-head-chunk-rows): ROUNDS
# rounds, each running the unfused plan and then every chunk size in turn,
# STEPS steps at micro-batch MB; each plan's activations and median step_s
# over steps 2.. per round.
[ -n "${CHUNKS:-}" ] || exit 0
echo "chunk sweep at micro-batch $timed_mb, $precision ($rounds rounds of $steps steps):"
plans=(unfused)
for rows in $CHUNKS; do
  "$dsc" --model gpt2 --config "$out/mb$timed_mb.json" --lm-head-chunk-rows="$rows" \
    -o "$out/r$rows.dsplan"
  plans+=("r$rows")
done
for ((r = 0; r < rounds; ++r)); do
  for p in "${plans[@]}"; do
    "$dsrun" "$out/$p.dsplan" --data "$data" --steps "$steps" \
      --metrics "$out/$p.sweep$r.jsonl" > /dev/null
  done
done
for p in "${plans[@]}"; do
  mib=$("$dsc" --model gpt2 --config "$out/mb$timed_mb.json" --report \
          $([ "$p" = unfused ] && echo --fuse-lm-head=false || echo --lm-head-chunk-rows="${p#r}") |
        awk '$1 == "activations" { printf "%.1f", $2 / 1048576; exit }')
  python3 - "$out" "$p" "$rounds" "$mib" <<'PY'
import json, statistics, sys
out, plan, rounds, mib = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
steps = []
for r in range(rounds):
    rows = [json.loads(l) for l in open(f"{out}/{plan}.sweep{r}.jsonl")][1:]
    steps.append(f"{statistics.median(x['step_s'] for x in rows):.3f} s")
print(f"  {plan:8} activations {mib} MiB, median step per round: {', '.join(steps)}")
PY
done
