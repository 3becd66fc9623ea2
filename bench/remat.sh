#!/usr/bin/env bash
# Rematerialization on CPU: activation peak (predicted and measured),
# recomputed FLOPs and step time per policy, and the memory/time frontier.
#
#   bash bench/remat.sh [OUT_DIR]
#
# gpt2 n_layer=8 n_head=8 n_embd=256 block_size=256, micro-batch 8, one
# rank, fp32, dropout 0.1, vocab_size=256 (byte-level, as the main job: at
# GPT-2's 50304 the logits and their gradient, 2 x 412 MB, would dwarf the
# blocks' activations, which is what remat acts on; their peaks are printed
# too, compile only). Policies: none, selective, layers, and auto at 25%,
# 50% and 75% of none's activation peak. Each plan runs WARMUP + STEPS
# steps, ROUNDS times, interleaved so drift on a shared machine hits all
# alike; the table has the median step time over all measured steps and
# its ratio to none's, measured in the same run. Writes the table to
# OUT_DIR/remat.md and the frontier to OUT_DIR/remat-frontier.png
# (matplotlib: Debian's python3-matplotlib, hence /usr/bin/python3 by
# default; PYTHON to change) and prints the table. For each auto row it
# says whether the point lies on or below the line joining the hand
# policies (none, selective, layers), in recomputed FLOPs and in time.
#
# Needs build/tools/{dsc,dsrun} (BUILD_DIR to change); builds nothing.
# Holds $DSC_BENCH_LOCK like the other benchmarks (bench/lock.sh).
# Knobs: STEPS (5), WARMUP (2), ROUNDS (3). TORCH_PY: a Python with torch
# >= 2.4 (PyPI's wheel works here without a GPU) to add PyTorch's
# activation_memory_budget at 1, 0.75, 0.5 and 0.25 (bench/torch_remat.py),
# run after dsc's in the same script; without it that part is skipped.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-remat-bench}
steps=${STEPS:-5}
warmup=${WARMUP:-2}
rounds=${ROUNDS:-3}
py=${PYTHON:-$([[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in "$build/tools/dsc" "$build/tools/dsrun"; do
  [[ -x "$tool" ]] || { echo "remat.sh: $tool missing (build first)" >&2; exit 2; }
done

python3 - "$out/data.bytes" <<'PY'
import random, sys
random.seed(7)
open(sys.argv[1], "wb").write(bytes(random.getrandbits(8) for _ in range(1 << 20)))
PY

shape=n_layer=8,n_head=8,n_embd=256,block_size=256,dropout=0.1,batch_size=8
model=gpt2:$shape,vocab_size=256
dsc() { "$build/tools/dsc" --model "$model" "$@"; }
peak() { sed -n 's/^  activations *\([0-9]*\) bytes.*/\1/p' "$1"; }

policies=(none selective layers)
for p in "${policies[@]}"; do
  dsc --remat=$p -o "$out/$p.dsplan" --report > "$out/$p.report"
done
none_peak=$(peak "$out/none.report")
for pct in 25 50 75; do
  budget=$((none_peak * pct / 100))
  dsc --remat=auto --activation-memory=$budget -o "$out/auto$pct.dsplan" \
    --report > "$out/auto$pct.report"
  policies+=(auto$pct)
done
for p in none selective layers; do
  "$build/tools/dsc" --model "gpt2:$shape,vocab_size=50304" --remat=$p \
    --report > "$out/wide.$p.report"
done

for r in $(seq "$rounds"); do
  for p in "${policies[@]}"; do
    "$build/tools/dsrun" "$out/$p.dsplan" --data "$out/data.bytes" \
      --steps $((warmup + steps)) --metrics "$out/$p.$r.jsonl" > /dev/null
  done
done

if [[ -n "${TORCH_PY:-}" ]]; then
  "$TORCH_PY" "$root/bench/torch_remat.py" --steps "$steps" --warmup "$warmup" \
    > "$out/torch.jsonl" 2> "$out/torch.log"
else
  rm -f "$out/torch.jsonl"
  echo "remat.sh: TORCH_PY unset: PyTorch's activation_memory_budget skipped" >&2
fi

"$py" - "$out" "$rounds" "$warmup" "$none_peak" "${policies[@]}" <<'PY'
import json, re, statistics, sys
out, rounds, warmup, none_peak = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
policies = sys.argv[5:]
mib = 1 << 20
def report(path):
    text = open(path).read()
    act = int(re.search(r"^  activations +(\d+) bytes", text, re.M).group(1))
    m = re.search(r"^remat: (.*), ([0-9.e+-]+) GFLOP recomputed per micro-step \(([0-9.]+)%", text, re.M)
    flops = float(re.search(r"^micro_step +\d+ kernels +([0-9.]+) GFLOP", text, re.M).group(1))
    return act, m.group(1), float(m.group(2)), float(m.group(3)), flops
rows, base = [], None
for p in policies:
    act, name, rec, pct, total = report(f"{out}/{p}.report")
    times, last = [], None
    for r in range(1, rounds + 1):
        recs = [json.loads(l) for l in open(f"{out}/{p}.{r}.jsonl")]
        times += [x["step_s"] for x in recs[warmup:]]
        last = recs[-1]
    measured = last["plan_written_bytes"]["activations"]
    predicted = last["predicted_bytes"]["activations"]
    med = statistics.median(times)
    base = base or med
    budget = f"{none_peak * int(p[4:]) // 100 / mib:.1f} MiB" if p.startswith("auto") else ""
    rows.append((p, budget, name, predicted, measured, rec, pct, med, med / base))
lines = ["## gpt2 8 x 256, block 256, micro-batch 8, vocab 256, one rank, fp32\n",
         "| policy | budget | chosen | predicted peak | measured peak | vs none | recomputed GFLOP / micro-step | median step | vs none |",
         "|---|---|---|---|---|---|---|---|---|"]
for p, budget, name, pred, meas, rec, pct, med, ratio in rows:
    lines.append(f"| {p} | {budget} | {name} | {pred / mib:.2f} MiB | "
                 f"{meas / mib:.2f} MiB{' (=)' if meas == pred else ''} | "
                 f"{none_peak / pred:.2f}x less | {rec:.3f} ({pct:.1f}%) | "
                 f"{med * 1e3:.0f} ms | {ratio:.3f}x |")
lines += ["", "## the same at vocab 50304 (compile only: dsc --report)\n",
          "| policy | activation peak | vs none |", "|---|---|---|"]
wide = {p: report(f"{out}/wide.{p}.report")[0] for p in ("none", "selective", "layers")}
for p, act in wide.items():
    lines.append(f"| {p} | {act / mib:.2f} MiB | {wide['none'] / act:.2f}x less |")
# The hand policies' frontier, piecewise linear in the peak; auto's points
# should lie on or below it.
hand = sorted((r for r in rows if not r[0].startswith("auto")), key=lambda r: r[3])
def line_at(x, col):
    for a, b in zip(hand, hand[1:]):
        if a[3] <= x <= b[3]:
            t = (x - a[3]) / (b[3] - a[3])
            return a[col] + t * (b[col] - a[col])
    return None
lines += ["", "auto against the line joining none, selective and layers (at auto's peak):\n",
          "| policy | recomputed GFLOP: auto / line | step time ratio: auto / line |", "|---|---|---|"]
for r in rows:
    if r[0].startswith("auto"):
        f, t = line_at(r[3], 5), line_at(r[3], 8)
        cell = lambda v, l: "below the hand policies' range" if l is None else f"{v:.3f} / {l:.3f} ({'on or below' if v <= l + 1e-9 else 'above'})"
        lines.append(f"| {r[0]} | {cell(r[5], f)} | {cell(r[8], t)} |")
import os
if os.path.exists(f"{out}/torch.jsonl"):
    recs = [json.loads(l) for l in open(f"{out}/torch.jsonl")]
    base_b, base_t = recs[0]["saved_bytes"], recs[0]["step_s"]
    lines += ["", f"## PyTorch {recs[0]['torch']}, torch.compile (inductor, CPU), the same model: activation_memory_budget\n",
              "Saved-for-backward bytes (not a peak: PyTorch keeps no allocator statistics on the CPU) and median step.\n",
              "| budget | saved for backward | vs 1.0 | median step | vs 1.0 | compile |", "|---|---|---|---|---|---|"]
    for r in recs:
        lines.append(f"| {r['budget']} | {r['saved_bytes'] / mib:.2f} MiB | {base_b / r['saved_bytes']:.2f}x less | "
                     f"{r['step_s'] * 1e3:.0f} ms | {r['step_s'] / base_t:.3f}x | {r['compile_s']} s |")
text = "\n".join(lines) + "\n"
open(f"{out}/remat.md", "w").write(text)
print(text)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("remat.sh: no matplotlib (apt-get install python3-matplotlib): no picture")
    sys.exit(0)
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
auto = [r for r in rows if r[0].startswith("auto")]
for ax, col, label in ((a, 5, "recomputed GFLOP per micro-step"), (b, 8, "step time / none's")):
    ax.plot([r[3] / mib for r in hand], [r[col] for r in hand], "o-", color="tab:blue", label="hand policies")
    for r in hand:
        ax.annotate(r[0], (r[3] / mib, r[col]), textcoords="offset points", xytext=(5, 5))
    ax.plot([r[3] / mib for r in auto], [r[col] for r in auto], "s", color="tab:red", label="auto (25/50/75% budgets)")
    for r in auto:
        ax.annotate(r[0], (r[3] / mib, r[col]), textcoords="offset points", xytext=(5, -12))
    ax.set_xlabel("activation peak (MiB, predicted = measured)")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    ax.legend()
fig.suptitle("dsc remat: gpt2 8 x 256, block 256, micro-batch 8 (CPU, fp32)")
fig.tight_layout()
fig.savefig(f"{out}/remat-frontier.png", dpi=110)
print(f"picture: {out}/remat-frontier.png")
PY
