#!/usr/bin/env bash
# Elementwise fusion (issue 32): a model's training step with its
# elementwise chains as ds.fused_elementwise groups (dsc's default) against
# the same plan with them apart (dsc --fuse-elementwise=false), fp32 and
# bf16, interleaved ROUNDS times so that a shared machine's drift hits
# every row alike.
#
#   bash bench/fused_elementwise.sh [OUT_DIR]
#
# MODEL (default a small Llama: 4 layers, dim 256, T 128, byte vocabulary,
# micro-batch 8, where SwiGLU's product and its backward fuse) is any
# `dsc --model` spec. AdamW, clipping 1.0, 4 MB of seeded random bytes.
# Prints per row the median step over every round's measured steps, the
# activation peak dsc predicts, and the fused calls' share of the step from
# a trace. Builds nothing; holds $DSC_BENCH_LOCK (bench/lock.sh). Knobs:
# MODEL, MB (8), STEPS (20), WARMUP (5), ROUNDS (4), BUILD_DIR.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-fused-elementwise-bench}
steps=${STEPS:-20}
warmup=${WARMUP:-5}
rounds=${ROUNDS:-4}
mb=${MB:-8}
model=${MODEL:-llama:n_layer=4,n_head=4,dim=256,block_size=128,vocab_size=256}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in "$build/tools/dsc" "$build/tools/dsrun"; do
  [[ -x "$tool" ]] || { echo "fused_elementwise.sh: $tool missing (build first)" >&2; exit 2; }
done

for p in fp32 bf16; do
  extra=""
  [[ $p == bf16 ]] && extra=', "bf16": {"enabled": true}'
  echo "{\"train_micro_batch_size_per_gpu\": $mb, \"gradient_clipping\": 1.0, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"weight_decay\": 0.1}}$extra}" > "$out/$p.json"
  for f in fused unfused; do
    flag=true
    [[ $f == unfused ]] && flag=false
    "$build/tools/dsc" --model "$model" --config "$out/$p.json" \
      --fuse-elementwise=$flag -o "$out/$p-$f.dsplan" --report > "$out/$p-$f.report"
  done
done
data=$out/random.bytes
[[ -s $data ]] || python3 -c "import random,sys; random.seed(1337); sys.stdout.buffer.write(random.randbytes(4_000_000))" > "$data"

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;" \
  "$(grep -o -E 'avx512_bf16|amx_bf16|avx512f|avx2' /proc/cpuinfo | sort -u | paste -sd' ')"
echo "model: $model, micro-batch $mb"
rows="fp32-fused fp32-unfused bf16-fused bf16-unfused"
# Odd rounds run each precision's fused plan first, even rounds its unfused
# plan first, so that neither always follows the other.
for r in $(seq "$rounds"); do
  echo "== round $r"
  order=$rows
  (( r % 2 == 0 )) && order="fp32-unfused fp32-fused bf16-unfused bf16-fused"
  for name in $order; do
    "$build/tools/dsrun" "$out/$name.dsplan" --data "$data" --steps $((warmup + steps)) \
      --metrics "$out/$name.$r.jsonl" > "$out/$name.$r.log" 2>&1
  done
done
for name in $rows; do
  "$build/tools/dsrun" "$out/$name.dsplan" --data "$data" --steps 6 \
    --trace "$out/$name.trace.json" > /dev/null 2>&1
done

python3 - "$out" "$rounds" "$warmup" "$rows" <<'PY'
import json, re, statistics, sys
out, rounds, warmup, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
def activations(name):
    for line in open(f"{out}/{name}.report"):
        m = re.match(r"\s*activations\s+(\d+) bytes", line)
        if m:
            return int(m.group(1)) / 2**20
def fused_share(name):
    events = json.load(open(f"{out}/{name}.trace.json"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    slices = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("step", 0) > 2]
    total = sum(e["dur"] for e in slices)
    fused = sum(e["dur"] for e in slices if e["name"] == "ds.fused_elementwise")
    calls = len([e for e in slices if e.get("cat") == "micro_step"]) / max(1, len({e["args"]["step"] for e in slices}))
    return fused / total if total else 0, calls
med = {}
print("\n| plan | median step (ms) | last loss | activations (MiB) | fused calls' share | micro_step calls |")
print("|---|---|---|---|---|---|")
for name in rows:
    times, loss = [], None
    for r in range(1, rounds + 1):
        recs = [json.loads(l) for l in open(f"{out}/{name}.{r}.jsonl")]
        times += [x["step_s"] for x in recs[warmup:]]
        loss = recs[-1]["loss"]
    med[name] = statistics.median(times)
    share, calls = fused_share(name)
    print(f"| {name} | {med[name] * 1e3:.1f} | {loss:.6f} | {activations(name):.2f} | {share:.1%} | {calls:.0f} |")
for p in ("fp32", "bf16"):
    print(f"{p}: fused / unfused step time = {med[p + '-fused'] / med[p + '-unfused']:.3f}x")
PY
