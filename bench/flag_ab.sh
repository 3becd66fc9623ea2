#!/usr/bin/env bash
# One dsc flag on and off (issue 32's fusions): a model's training step
# compiled with `dsc --FLAG=true` (the default) against `--FLAG=false`, fp32
# and bf16, interleaved ROUNDS times so that a shared machine's drift hits
# every row alike.
#
#   FLAG=fold-attention-layout bash bench/flag_ab.sh [OUT_DIR]
#
# MODEL is any `dsc --model` spec (default the small GPT of bench/gpt2_cpu.sh:
# 4 layers, d 256, T 128, byte vocabulary), micro-batch MB. AdamW, clipping
# 1.0, 4 MB of seeded random bytes. Prints per row the median step over
# every round's measured steps, the last loss, the activation peak dsc
# predicts, the micro-step's calls and the share of the step in the kernels
# named by SHARE (a regex, default the transposes) from a trace. Builds
# nothing; holds $DSC_BENCH_LOCK (bench/lock.sh). Knobs: FLAG (required),
# MODEL, MB (8), STEPS (20), WARMUP (5), ROUNDS (4), SHARE, BUILD_DIR.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
flag=${FLAG:?FLAG: a dsc boolean flag, e.g. fold-attention-layout}
out=${1:-${TMPDIR:-/tmp}/dsc-$flag-bench}
steps=${STEPS:-20}
warmup=${WARMUP:-5}
rounds=${ROUNDS:-4}
mb=${MB:-8}
model=${MODEL:-gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0}
share=${SHARE:-ds.transpose}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in "$build/tools/dsc" "$build/tools/dsrun"; do
  [[ -x "$tool" ]] || { echo "flag_ab.sh: $tool missing (build first)" >&2; exit 2; }
done

for p in fp32 bf16; do
  extra=""
  [[ $p == bf16 ]] && extra=', "bf16": {"enabled": true}'
  echo "{\"train_micro_batch_size_per_gpu\": $mb, \"gradient_clipping\": 1.0, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"weight_decay\": 0.1}}$extra}" > "$out/$p.json"
  for f in on off; do
    value=true
    [[ $f == off ]] && value=false
    "$build/tools/dsc" --model "$model" --config "$out/$p.json" \
      "--$flag=$value" -o "$out/$p-$f.dsplan" --report > "$out/$p-$f.report"
  done
done
data=$out/random.bytes
[[ -s $data ]] || python3 -c "import random,sys; random.seed(1337); sys.stdout.buffer.write(random.randbytes(4_000_000))" > "$data"

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;" \
  "$(grep -o -E 'avx512_bf16|amx_bf16|avx512f|avx2' /proc/cpuinfo | sort -u | paste -sd' ')"
echo "model: $model, micro-batch $mb; --$flag on and off"
rows="fp32-on fp32-off bf16-on bf16-off"
# Odd rounds run each precision's plan with the flag on first, even rounds
# the one with it off, so that neither always follows the other.
for r in $(seq "$rounds"); do
  echo "== round $r"
  order=$rows
  (( r % 2 == 0 )) && order="fp32-off fp32-on bf16-off bf16-on"
  for name in $order; do
    "$build/tools/dsrun" "$out/$name.dsplan" --data "$data" --steps $((warmup + steps)) \
      --metrics "$out/$name.$r.jsonl" > "$out/$name.$r.log" 2>&1
  done
done
for name in $rows; do
  "$build/tools/dsrun" "$out/$name.dsplan" --data "$data" --steps 6 \
    --trace "$out/$name.trace.json" > /dev/null 2>&1
done

python3 - "$out" "$rounds" "$warmup" "$rows" "$share" "$flag" <<'PY'
import json, re, statistics, sys
out, rounds, warmup, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
share_re, flag = re.compile(sys.argv[5]), sys.argv[6]
def activations(name):
    for line in open(f"{out}/{name}.report"):
        m = re.match(r"\s*activations\s+(\d+) bytes", line)
        if m:
            return int(m.group(1)) / 2**20
def kernel_share(name):
    events = json.load(open(f"{out}/{name}.trace.json"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    slices = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("step", 0) > 2]
    total = sum(e["dur"] for e in slices)
    matched = sum(e["dur"] for e in slices if share_re.fullmatch(e["name"]))
    calls = len([e for e in slices if e.get("cat") == "micro_step"]) / max(1, len({e["args"]["step"] for e in slices}))
    return matched / total if total else 0, calls
med = {}
print(f"\n| plan (--{flag}) | median step (ms) | last loss | activations (MiB) | {share_re.pattern} share | micro_step calls |")
print("|---|---|---|---|---|---|")
for name in rows:
    times, loss = [], None
    for r in range(1, rounds + 1):
        recs = [json.loads(l) for l in open(f"{out}/{name}.{r}.jsonl")]
        times += [x["step_s"] for x in recs[warmup:]]
        loss = recs[-1]["loss"]
    med[name] = statistics.median(times)
    part, calls = kernel_share(name)
    print(f"| {name} | {med[name] * 1e3:.1f} | {loss:.6f} | {activations(name):.2f} | {part:.1%} | {calls:.0f} |")
for p in ("fp32", "bf16"):
    print(f"{p}: on / off step time = {med[p + '-on'] / med[p + '-off']:.3f}x")
PY
