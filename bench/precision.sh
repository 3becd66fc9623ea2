#!/usr/bin/env bash
# Mixed precision on CPU: memory per category (predicted and measured) and
# step time in fp32, fp16 and bf16.
#
#   bash bench/precision.sh [OUT_DIR]
#
# 1. gpt2 n_layer=4 n_head=4 n_embd=256 block_size=128 vocab_size=256,
#    micro-batch 8, one rank, AdamW, clipping 1.0, random bytes as data:
#    for each precision dsc --report and a dsrun of WARMUP + STEPS steps,
#    ROUNDS times, interleaved (fp32, fp16, bf16, fp32, ...) so that drift
#    on a shared machine hits all three alike. Prints, per precision, the
#    bytes the plan predicted and the arenas' measured high-water marks per
#    category (from the last step's metrics), the median step time over all
#    rounds' measured steps and its ratio to fp32.
# 2. GPT-2 small (124M) compiled only, at stage 0 on 1 rank and stage 3 on
#    8: the per-category bytes of --report in each precision and the bytes
#    a micro-step hands to collectives.
#
# Needs build/tools/{dsc,dsrun} (BUILD_DIR to change); builds nothing.
# Holds $DSC_BENCH_LOCK like the other benchmarks (bench/lock.sh).
# Knobs: STEPS (20), WARMUP (3), ROUNDS (3).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-precision-bench}
steps=${STEPS:-20}
warmup=${WARMUP:-3}
rounds=${ROUNDS:-3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in "$build/tools/dsc" "$build/tools/dsrun"; do
  [[ -x "$tool" ]] || { echo "precision.sh: $tool missing (build first)" >&2; exit 2; }
done

config() { # precision stage micro-batch
  local extra=""
  case $1 in
    fp16) extra=', "fp16": {"enabled": true}' ;;
    bf16) extra=', "bf16": {"enabled": true}' ;;
  esac
  echo "{\"train_micro_batch_size_per_gpu\": $3, \"gradient_clipping\": 1.0, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"betas\": [0.9, 0.95], \"weight_decay\": 0.1}}, \"zero_optimization\": {\"stage\": $2}$extra}"
}

python3 - "$out/data.bytes" <<'PY'
import random, sys
random.seed(7)
open(sys.argv[1], "wb").write(bytes(random.getrandbits(8) for _ in range(1 << 20)))
PY

model=gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0
for p in fp32 fp16 bf16; do
  config $p 0 8 > "$out/$p.json"
  "$build/tools/dsc" --model "$model" --config "$out/$p.json" -o "$out/$p.dsplan" \
    --report > "$out/$p.report"
done
for r in $(seq "$rounds"); do
  for p in fp32 fp16 bf16; do
    "$build/tools/dsrun" "$out/$p.dsplan" --data "$out/data.bytes" \
      --steps $((warmup + steps)) --metrics "$out/$p.$r.jsonl" > /dev/null
  done
done

small=gpt2:n_layer=12,n_head=12,n_embd=768,block_size=1024,vocab_size=50257
for p in fp32 fp16 bf16; do
  config $p 0 1 > "$out/small0.$p.json"
  config $p 3 1 > "$out/small3.$p.json"
  "$build/tools/dsc" --model "$small" --config "$out/small0.$p.json" --report > "$out/small0.$p.report"
  "$build/tools/dsc" --model "$small" --config "$out/small3.$p.json" --world-size 8 --report > "$out/small3.$p.report"
done

python3 - "$out" "$rounds" "$warmup" <<'PY'
import json, re, statistics, sys
out, rounds, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cats = ["params", "grads", "optimizer_state", "activations", "comm_buffers"]
def report(path):
    text = open(path).read()
    got = {c: int(m.group(1)) for c in cats
           if (m := re.search(rf"^  {c} +(\d+) bytes", text, re.M))}
    m = re.search(r"^micro_step .* ([0-9.]+) MB to collectives", text, re.M)
    got["collective_mb"] = float(m.group(1)) if m else 0.0
    return got
print("## gpt2 4 x 256, micro-batch 8, one rank: bytes per category (predicted = measured?) and step time\n")
print("| precision | " + " | ".join(cats) + " | median step | vs fp32 |")
print("|---|" + "---|" * (len(cats) + 2))
base = None
for p in ["fp32", "fp16", "bf16"]:
    times, last = [], None
    for r in range(1, rounds + 1):
        recs = [json.loads(l) for l in open(f"{out}/{p}.{r}.jsonl")]
        times += [x["step_s"] for x in recs[warmup:]]
        last = recs[-1]
    pred, meas = last["predicted_bytes"], last["plan_written_bytes"]
    cells = [f"{pred.get(c, 0)} ({'=' if pred.get(c, 0) == meas.get(c, 0) else meas.get(c, 0)})" for c in cats]
    med = statistics.median(times)
    base = base or med
    print(f"| {p} | " + " | ".join(cells) + f" | {med * 1e3:.1f} ms | {med / base:.2f}x |")
for label, stage in (("stage 0, 1 rank", 0), ("stage 3, 8 ranks", 3)):
    print(f"\n## GPT-2 small (124M), {label}: per-rank bytes (dsc --report)\n")
    print("| precision | " + " | ".join(cats) + " | MB to collectives per micro-step |")
    print("|---|" + "---|" * (len(cats) + 1))
    ref = report(f"{out}/small{stage}.fp32.report")
    for p in ["fp32", "fp16", "bf16"]:
        r = report(f"{out}/small{stage}.{p}.report")
        cells = [f"{r.get(c, 0)} ({r.get(c, 0) / ref[c]:.3f})" if ref.get(c) else str(r.get(c, 0)) for c in cats]
        print(f"| {p} | " + " | ".join(cells) + f" | {r['collective_mb']:.1f} ({r['collective_mb'] / ref['collective_mb']:.3f}) |" if ref['collective_mb'] else f"| {p} | " + " | ".join(cells) + " | 0 |")
PY
