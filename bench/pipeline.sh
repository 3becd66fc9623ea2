#!/usr/bin/env bash
# Pipeline parallelism on 2 ranks of this machine (CPU, MPI), one core a
# rank, against one rank on one core and 2 data-parallel ranks:
#   one     1 rank, 8 micro-batches a step
#   d2      2 data-parallel ranks (ZeRO 0), 4 micro-batches each
#   p2      "pipeline": {"stages": 2}, 1F1B, 8 micro-batches
#   p2g     the same with GPipe
#
#   bash bench/pipeline.sh [OUT_DIR]   # default /tmp/dsc-pipeline-bench
#
# gpt2 n_layer=4 n_head=8 n_embd=256 block_size=128 vocab_size=256
# dropout=0, micro-batches of 2 sequences, 16 sequences a step, AdamW. For
# each: dsc --report --machine cpu (the pipeline's predicted step and
# bubble), dsrun for STEPS (12) steps with --metrics; then the median step
# time over steps 3.., each rank's arena bytes, and the measured bubble of
# a pipeline of P stages as 1 - T(one) / (P x T(pipeline)): the share of
# the stages' time not spent on one rank's work (messages, waiting,
# imbalance). Builds nothing; holds $DSC_BENCH_LOCK (lock.sh).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-pipeline-bench}
steps=${STEPS:-12}
data=${DATA:-/usr/share/common-licenses/GPL-3}
model=gpt2:n_layer=4,n_head=8,n_embd=256,block_size=128,vocab_size=256,dropout=0
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1 DSC_CPU_THREADS=1

config() { # tag accumulation extra-json
  cat > "$out/$1.json" <<EOF2
{
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": $2,
  "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}}$3
}
EOF2
}
config one 8 ''
config d2 4 ''
config p2 8 ', "pipeline": {"stages": 2}'
config p2g 8 ', "pipeline": {"stages": 2, "schedule": "gpipe"}'

for tag in one d2 p2 p2g; do
  ranks=$([ "$tag" = one ] && echo 1 || echo 2)
  "$build/tools/dsc" --model "$model" --config "$out/$tag.json" \
    --world-size "$ranks" -o "$out/$tag.dsplan" --report --machine cpu \
    > "$out/$tag.report.txt"
  rm -f "$out/$tag.metrics"*.jsonl
  "$build/tools/dsrun" "$out/$tag.dsplan" --np "$ranks" --data "$data" \
    --steps "$steps" --metrics "$out/$tag.metrics.jsonl" > "$out/$tag.out"
done

python3 - "$out" <<'EOF2'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
def step_s(tag):
    with open(os.path.join(out, f"{tag}.metrics.jsonl")) as f:
        rows = [json.loads(l) for l in f]
    return statistics.median(r["step_s"] for r in rows[2:])
def arena_bytes(tag):
    per_rank = []
    for path in sorted(glob.glob(os.path.join(out, f"{tag}.metrics*.jsonl"))):
        with open(path) as f:
            last = [json.loads(l) for l in f][-1]
        per_rank.append(sum(last["plan_written_bytes"].values()))
    return per_rank
def predicted(tag):
    text = open(os.path.join(out, f"{tag}.report.txt")).read()
    m = re.search(r"step ([0-9.]+) ms, bubble ([0-9.]+)%", text)
    return (float(m.group(1)), float(m.group(2))) if m else (None, None)
t1 = step_s("one")
print(f"{'run':6} {'step ms':>9} {'vs one':>7} {'bubble':>8} {'predicted':>10}  arena MiB per rank")
for tag in ["one", "d2", "p2", "p2g"]:
    t = step_s(tag)
    ranks = 1 if tag == "one" else 2
    bubble = f"{100 * (1 - t1 / (ranks * t)):.1f}%" if tag.startswith("p") else "-"
    pm, pb = predicted(tag)
    pred = f"{pb:.1f}%" if pb is not None else "-"
    mib = " ".join(f"{b / 2**20:.1f}" for b in arena_bytes(tag))
    print(f"{tag:6} {t * 1e3:9.1f} {t1 / t:6.2f}x {bubble:>8} {pred:>10}  {mib}")
EOF2
