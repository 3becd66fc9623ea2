#!/usr/bin/env bash
# One training step's time with each optimizer on bench/gpt2_cpu.sh's model
# (gpt2 n_layer=4 n_head=4 n_embd=256 block_size=128, micro-batch 8,
# clipping 1.0), on one rank or, with RANKS=2, two ranks at ZeRO stage 1
# (where Muon's Newton-Schulz iterations are divided among the ranks):
#
#   bash bench/optimizers_step.sh BUILD_DIR [ROUNDS] [RANKS]
#
# Compiles one plan per optimizer (AdamW, Lamb, Muon; Muon's matrices by
# DeepSpeed's rule, the rest AdamW), trains each 30 steps on 4 MB of
# seeded random bytes, the optimizers in rotated order each round (default
# 3 rounds), and prints each one's median step_s over steps 6-30, its ratio
# to AdamW's, the @apply program's FLOPs and the optimizer state from the
# plan's report (dsc --report). Holds
# $DSC_BENCH_LOCK.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

build=${1:?build dir}
rounds=${2:-3}
ranks=${3:-1}
zero=""
if [ "$ranks" -gt 1 ]; then zero='"zero_optimization": {"stage": 1},'; fi
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
opts=(AdamW Lamb Muon)
for o in "${opts[@]}"; do
  cat > "$out/$o.json" <<JSON
{"train_micro_batch_size_per_gpu": 8, "gradient_clipping": 1.0, $zero
 "optimizer": {"type": "$o", "params": {"lr": 1e-3, "weight_decay": 0.1}}}
JSON
done
"$py" -c "import random,sys; random.seed(1337); sys.stdout.buffer.write(random.randbytes(4_000_000))" > "$out/data.bytes"
model=gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0
for o in "${opts[@]}"; do
  "$build/tools/dsc" --model "$model" --config "$out/$o.json" -o "$out/$o.dsplan" \
    --world-size "$ranks" --report > "$out/$o.report" 2>&1
done
for r in $(seq "$rounds"); do
  for k in 0 1 2; do
    o=${opts[$(((k + r) % 3))]}
    "$build/tools/dsrun" "$out/$o.dsplan" --np "$ranks" --data "$out/data.bytes" --steps 30 \
      --metrics "$out/$o.$r.jsonl" > /dev/null 2>&1
  done
done
"$py" - "$out" "${opts[@]}" <<'PY'
import glob, json, os, re, statistics, sys
out, opts = sys.argv[1], sys.argv[2:]
med = {}
for o in opts:
    per_run = []
    for path in glob.glob(os.path.join(out, o + ".*.jsonl")):
        steps = [json.loads(l) for l in open(path) if l.strip()]
        per_run.append(statistics.median(
            s["step_s"] for s in steps if s.get("step", 0) > 5 and "step_s" in s))
    med[o] = (statistics.median(per_run), per_run)
print("| optimizer | median step per run (ms) | median | vs AdamW | @apply GFLOP | optimizer state |")
print("|---|---|---|---|---|---|")
for o in opts:
    m, runs = med[o]
    report = open(os.path.join(out, o + ".report")).read()
    flops = re.search(r"^apply\s+\d+ kernels\s+([0-9.]+) GFLOP", report, re.M)
    state = re.search(r"^  optimizer_state\s+\d+ bytes\s+([0-9.]+ MiB)", report, re.M)
    print(f"| {o} | {', '.join(f'{1000 * x:.1f}' for x in sorted(runs))} | "
          f"{1000 * m:.1f} | {m / med['AdamW'][0]:.2f}x | "
          f"{flops.group(1) if flops else '?'} | "
          f"{state.group(1) if state else '?'} |")
PY
