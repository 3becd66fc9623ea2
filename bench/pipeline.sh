#!/usr/bin/env bash
# Pipeline parallelism on R ranks of this machine (CPU, MPI; RANKS=2 or 4),
# against one rank and R data-parallel ranks:
#   one     1 rank, 8 micro-batches a step
#   dR      R data-parallel ranks (ZeRO 1), 8 / R micro-batches each
#   pR      "pipeline": {"stages": R}, 1F1B, 8 micro-batches
#   pRg     the same with GPipe
#   pRi     the same, interleaved with 2 chunks a stage
#   pRz     the same, ZB-H1
#   p2d2zZ  (4 ranks) 2 replicas of 2 stages, 1F1B, at ZeRO Z = 1, 2, 3
#
#   bash bench/pipeline.sh [OUT_DIR]          # 2 ranks, one core each
#   RANKS=4 bash bench/pipeline.sh [OUT_DIR]  # 4 ranks (2 to a core here)
#
# gpt2 n_head=8 n_embd=256 block_size=128 vocab_size=256 dropout=0 with 4
# layers on 2 ranks and 8 on 4 (the issue's benchmark), micro-batches of 2
# sequences, 16 sequences a step, AdamW. For each: dsc --report --machine
# cpu (the pipeline's predicted step and bubble), dsrun for STEPS (12)
# steps with --metrics; then the median step time over steps 3.., each
# rank's arena bytes, the bubble dsrun measured (its metrics' "bubble":
# 1 - the ranks' compute-stream busy time / (ranks x the step's micro_step
# span), the median over steps 3..), and the share of the stages' time not
# spent on one rank's work, 1 - T(one) / (R x T(pipeline)), which also
# counts the messages' cost. Builds nothing; holds $DSC_BENCH_LOCK
# (lock.sh).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
ranks=${RANKS:-2}
out=${1:-${TMPDIR:-/tmp}/dsc-pipeline-bench-$ranks}
steps=${STEPS:-12}
data=${DATA:-/usr/share/common-licenses/GPL-3}
case "$ranks" in
2) layers=4 ;;
4) layers=8 ;;
*) echo "bench/pipeline.sh: RANKS=$ranks: 2 or 4" >&2; exit 2 ;;
esac
model=gpt2:n_layer=$layers,n_head=8,n_embd=256,block_size=128,vocab_size=256,dropout=0
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1 DSC_CPU_THREADS=1
# More ranks than cores: mpirun must be told.
over=$([ "$ranks" -gt "$(nproc)" ] && echo --oversubscribe || true)

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
config "d$ranks" $((8 / ranks)) ', "zero_optimization": {"stage": 1}'
config "p$ranks" 8 ", \"pipeline\": {\"stages\": $ranks}"
config "p${ranks}g" 8 ", \"pipeline\": {\"stages\": $ranks, \"schedule\": \"gpipe\"}"
config "p${ranks}i" 8 ", \"pipeline\": {\"stages\": $ranks, \"schedule\": \"interleaved\", \"virtual_stages\": 2}"
config "p${ranks}z" 8 ", \"pipeline\": {\"stages\": $ranks, \"schedule\": \"zbh1\"}"

tags="one d$ranks p$ranks p${ranks}g p${ranks}i p${ranks}z"
if [ "$ranks" = 4 ]; then
  # Two replicas of a 2-stage pipeline at ZeRO 1, 2 and 3: the memory each
  # stage saves against the reduce-scatters (and at 3 the gathers) each
  # micro-batch costs (stage 3's persistence threshold 0: every parameter
  # sharded).
  for z in 1 2 3; do
    extra=$([ "$z" = 3 ] && echo ', "stage3_param_persistence_threshold": 0' || true)
    config "p2d2z$z" 4 ", \"pipeline\": {\"stages\": 2}, \"zero_optimization\": {\"stage\": $z$extra}"
    tags="$tags p2d2z$z"
  done
fi
for tag in $tags; do
  n=$([ "$tag" = one ] && echo 1 || echo "$ranks")
  "$build/tools/dsc" --model "$model" --config "$out/$tag.json" \
    --world-size "$n" -o "$out/$tag.dsplan" --report --machine cpu \
    > "$out/$tag.report.txt"
  rm -f "$out/$tag.metrics"*.jsonl
  "$build/tools/dsrun" "$out/$tag.dsplan" --np "$n" $([ "$n" -gt 1 ] && echo $over) \
    --data "$data" --steps "$steps" --metrics "$out/$tag.metrics.jsonl" \
    > "$out/$tag.out"
done

python3 - "$out" "$ranks" $tags <<'EOF2'
import glob, json, os, re, statistics, sys
out, ranks, tags = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def rows(tag):
    with open(os.path.join(out, f"{tag}.metrics.jsonl")) as f:
        return [json.loads(l) for l in f][2:]
def step_s(tag):
    return statistics.median(r["step_s"] for r in rows(tag))
def measured(tag):
    b = [r["bubble"] for r in rows(tag) if "bubble" in r]
    return f"{100 * statistics.median(b):.1f}%" if b else "-"
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
print(f"{'run':6} {'step ms':>9} {'vs one':>7} {'bubble':>8} {'predicted':>10} "
      f"{'1-T1/RT':>8}  arena MiB per rank")
for tag in tags:
    t = step_s(tag)
    n = 1 if tag == "one" else ranks
    share = f"{100 * (1 - t1 / (n * t)):.1f}%" if tag.startswith("p") else "-"
    pm, pb = predicted(tag)
    pred = f"{pb:.1f}%" if pb is not None else "-"
    mib = " ".join(f"{b / 2**20:.1f}" for b in arena_bytes(tag))
    print(f"{tag:6} {t * 1e3:9.1f} {t1 / t:6.2f}x {measured(tag):>8} "
          f"{pred:>10} {share:>8}  {mib}")
EOF2
