#!/usr/bin/env bash
# CPU training benchmark: dsrun against PyTorch eager on one small GPT-2.
#
#   bash bench/gpt2_cpu.sh [OUT_DIR]
#
# Model gpt2 n_layer=4 n_head=4 n_embd=256 block_size=128 vocab_size=256,
# micro-batch 8, fp32, one rank, AdamW (lr 1e-3, betas 0.9/0.95, weight
# decay 0.1 on rank >= 2 parameters), gradient clipping 1.0, random bytes
# as data. Builds nothing: it needs build/tools/{dsc,dsrun} (BUILD_DIR to
# change), Debian's /usr/bin/python3 with python3-torch, and /usr/bin/time
# (Debian package `time`).
#
# One invocation runs, in this order:
#   1. dsrun
#   2. torch, as configured by default: torch.set_num_threads(os.cpu_count()),
#      environment untouched (TORCH_DEFAULT=0 skips it)
#   3. torch, tuned: same threads, plus OPENBLAS_CORETYPE set the way dsrun
#      sets it for itself, OMP_WAIT_POLICY=PASSIVE and
#      OPENBLAS_THREAD_TIMEOUT=$BLAS_TIMEOUT (see docs/performance.md): the
#      fastest PyTorch configuration found on the benchmark machine
#   4. dsrun again, to expose drift
#   5. dsrun with OPENBLAS_THREAD_TIMEOUT=$BLAS_TIMEOUT (BLAS_TIMEOUT=0 skips)
#   6. dsrun --trace for 10 steps and bench/trace_summary.py (TRACE=0 skips)
# and prints a markdown table: median step time over STEPS steps after WARMUP
# warm-up steps, tokens/s, model FLOP/s (dsc --report's GFLOP per step:
# forward + backward + optimizer), peak RSS (dsrun: /usr/bin/time -v; torch:
# getrusage ru_maxrss), and the ratios dsrun/PyTorch. The "others" column is
# the CPU time the rest of the machine used during the run (from /proc/stat),
# as a share of the run's wall time x cores: more than a few percent means
# the run was disturbed; repeat it.
#
# The whole measurement holds the lock $DSC_BENCH_LOCK (default
# /tmp/dsc-build.lock) so that nobody compiles while it runs: the script
# re-runs itself under `flock`. Set DSC_BENCH_LOCK= (empty) if you already
# hold it, or you will wait for yourself.
#
# Knobs: STEPS (30), WARMUP (5), DATA (a file read as bytes; default: 4 MB
# of seeded random bytes in OUT_DIR), BUILD_DIR, TORCH_DEFAULT (1), TRACE (1),
# BLAS_TIMEOUT (20; log2 of the cycles OpenBLAS's idle threads spin).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-gpt2-cpu-bench}
steps=${STEPS:-30}
blas_timeout=${BLAS_TIMEOUT:-20}
warmup=${WARMUP:-5}
total=$((steps + warmup))
py=/usr/bin/python3
mkdir -p "$out"
out=$(cd "$out" && pwd)

for tool in "$build/tools/dsc" "$build/tools/dsrun"; do
  [[ -x "$tool" ]] || { echo "gpt2_cpu.sh: $tool missing (build first; this script builds nothing)" >&2; exit 2; }
done
if [[ ! -x /usr/bin/time ]]; then
  if [[ $(id -u) == 0 ]]; then apt-get install -y time >/dev/null; else
    echo "gpt2_cpu.sh: /usr/bin/time missing: apt-get install -y time" >&2; exit 2; fi
fi
"$py" -c "import torch" 2>/dev/null ||
  { echo "gpt2_cpu.sh: $py cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

model=gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0
cat > "$out/ds_config.json" <<'EOF'
{
  "train_micro_batch_size_per_gpu": 8,
  "gradient_accumulation_steps": 1,
  "gradient_clipping": 1.0,
  "optimizer": {
    "type": "AdamW",
    "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
  }
}
EOF

data=${DATA:-$out/random.bytes}
if [[ ! -s "$data" ]]; then
  # Not ".bin": dsrun reads that suffix as nanoGPT's uint16 tokens.
  "$py" -c "import random,sys; random.seed(1337); sys.stdout.buffer.write(random.randbytes(4_000_000))" > "$data"
fi

echo "== machine"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|L2 cache|L3 cache):' | sed 's/  */ /g'
free -g | sed -n '1,2p'
echo
echo "== dsc --model $model --config $out/ds_config.json -o $out/bench.dsplan --report"
"$build/tools/dsc" --model "$model" --config "$out/ds_config.json" \
    -o "$out/bench.dsplan" --report | tee "$out/report.txt"

# The OpenBLAS core dsrun picks for itself (runtime/backends/cpu/Blas.cpp).
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
if has avx512f && has avx512bw && has avx512dq && has avx512vl; then core=SkylakeX
elif has avx2 && has fma; then core=Haswell
else core=; fi

cpu_busy() { # busy jiffies of the whole machine (user..steal, without idle/iowait)
  awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat
}

# run NAME CMD...: runs CMD under /usr/bin/time -v, recording wall time and
# the machine's busy jiffies around it.
run() {
  local name=$1; shift
  local b0 t0 t1 b1
  b0=$(cpu_busy); t0=$(date +%s.%N)
  /usr/bin/time -v -o "$out/$name.time" "$@"
  t1=$(date +%s.%N); b1=$(cpu_busy)
  echo "$b0 $b1 $t0 $t1" > "$out/$name.cpu"
}

echo
echo "== 1. dsrun ($total steps)"
run dsrun1 "$build/tools/dsrun" "$out/bench.dsplan" --data "$data" \
    --steps "$total" --metrics "$out/dsrun1.jsonl" > "$out/dsrun1.log" 2>&1

torch_cmd=("$py" "$root/bench/torch_gpt2.py" --data "$data" --steps "$steps" --warmup "$warmup")
if [[ "${TORCH_DEFAULT:-1}" != 0 ]]; then
  echo "== 2. torch eager, default environment"
  run torch_default "${torch_cmd[@]}" > "$out/torch_default.json" 2> "$out/torch_default.err"
fi
tuned_env=(${core:+OPENBLAS_CORETYPE=$core} OMP_WAIT_POLICY=PASSIVE)
[[ "$blas_timeout" != 0 ]] && tuned_env+=("OPENBLAS_THREAD_TIMEOUT=$blas_timeout")
echo "== 3. torch eager, tuned (${tuned_env[*]})"
run torch_tuned env "${tuned_env[@]}" \
    "${torch_cmd[@]}" > "$out/torch_tuned.json" 2> "$out/torch_tuned.err"
echo "== 4. dsrun again"
run dsrun2 "$build/tools/dsrun" "$out/bench.dsplan" --data "$data" \
    --steps "$total" --metrics "$out/dsrun2.jsonl" > "$out/dsrun2.log" 2>&1
if [[ "$blas_timeout" != 0 ]]; then
  echo "== 5. dsrun with OPENBLAS_THREAD_TIMEOUT=$blas_timeout"
  run dsrun3 env "OPENBLAS_THREAD_TIMEOUT=$blas_timeout" "$build/tools/dsrun" \
      "$out/bench.dsplan" --data "$data" --steps "$total" \
      --metrics "$out/dsrun3.jsonl" > "$out/dsrun3.log" 2>&1
fi

for f in torch_default torch_tuned; do
  [[ -f "$out/$f.err" ]] || continue
  echo "-- $f: $(grep -E '^torch .*get_num_threads' "$out/$f.err")"
  echo "   $(grep -E '^OpenBLAS in this process' "$out/$f.err")"
  echo "   $(grep -E '^OPENBLAS_CORETYPE=' "$out/$f.err")"
done
echo

"$py" - "$out" "$warmup" "$steps" "$blas_timeout" <<'EOF'
import json, os, re, statistics, sys

out, warmup, steps, blas_timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ncpu = os.cpu_count()
tick = os.sysconf("SC_CLK_TCK")

def time_v(name):
    """(peak RSS KiB, user+sys seconds) from /usr/bin/time -v."""
    text = open(os.path.join(out, name + ".time")).read()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", text).group(1))
    sys_ = float(re.search(r"System time \(seconds\): ([\d.]+)", text).group(1))
    return rss, user + sys_

def others(name):
    """Share of the machine's CPU capacity used by other processes during the run."""
    b0, b1, t0, t1 = open(os.path.join(out, name + ".cpu")).read().split()
    busy = (int(b1) - int(b0)) / tick
    wall = float(t1) - float(t0)
    own = time_v(name)[1]
    return max(0.0, busy - own) / (wall * ncpu)

report = open(os.path.join(out, "report.txt")).read()
gflop = sum(float(g) for g in re.findall(r"^\S+\s+\d+ kernels\s+([\d.]+) GFLOP", report, re.M))
params = int(re.search(r"(\d+) parameters", report).group(1))
m = re.search(r"micro-batch (\d+) x (\d+) tokens", report)
tokens = int(m.group(1)) * int(m.group(2))

rows = {}
def dsrun_steps(name):
    recs = [json.loads(l) for l in open(os.path.join(out, name + ".jsonl"))]
    return [r["step_s"] for r in recs[warmup:warmup + steps]]

d1, d2 = dsrun_steps("dsrun1"), dsrun_steps("dsrun2")
for name, times, src in (("dsrun1", d1, "dsrun1"), ("dsrun2", d2, "dsrun2"),
                         ("dsrun (both runs)", d1 + d2, None)):
    rss = max(time_v("dsrun1")[0], time_v("dsrun2")[0]) if src is None else time_v(src)[0]
    oth = max(others("dsrun1"), others("dsrun2")) if src is None else others(src)
    rows[name] = dict(med=statistics.median(times), lo=min(times), hi=max(times),
                      n=len(times), rss=rss, others=oth)
knob = "dsrun3 (OPENBLAS_THREAD_TIMEOUT=%s)" % blas_timeout
if os.path.exists(os.path.join(out, "dsrun3.jsonl")):
    t3 = dsrun_steps("dsrun3")
    rows[knob] = dict(med=statistics.median(t3), lo=min(t3), hi=max(t3), n=len(t3),
                      rss=time_v("dsrun3")[0], others=others("dsrun3"))
for name in ("torch_default", "torch_tuned"):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path) or not open(path).read().strip():
        continue
    j = json.loads(open(path).read().strip().splitlines()[-1])
    rows["torch eager, " + name.split("_")[1]] = dict(
        med=j["median_step_s"], lo=j["min_step_s"], hi=j["max_step_s"], n=j["steps"],
        rss=j["peak_rss_kib"], others=others(name), threads=j["threads"],
        core=re.search(r"core (\w+)", j.get("openblas") or "core ?").group(1),
        rss_import=j["rss_before_model_kib"])

# Cross-check of dsc's count: 6 N T + attention (QK^T and AV, forward + backward).
L, C, T = 4, 256, 128
attn = 3 * L * 2 * 2 * (tokens // T) * T * T * C
print("FLOPs per step: %.3f GFLOP from dsc --report (micro_step + apply: forward, "
      "backward, optimizer); 6*N*tokens + attention = 6*%d*%d + %.3fG = %.3f GFLOP"
      % (gflop, params, tokens, attn / 1e9, (6 * params * tokens + attn) / 1e9))
print()
print("| run | median step (ms) | min-max (ms) | tokens/s | model GFLOP/s | peak RSS (MiB) | others' CPU |")
print("|---|---|---|---|---|---|---|")
for name, r in rows.items():
    extra = ""
    if "threads" in r:
        extra = " (%d threads, OpenBLAS %s)" % (r["threads"], r["core"])
    print("| %s%s | %.1f | %.1f-%.1f | %.0f | %.1f | %.1f | %.0f%% |" % (
        name, extra, 1e3 * r["med"], 1e3 * r["lo"], 1e3 * r["hi"], tokens / r["med"],
        gflop / r["med"], r["rss"] / 1024, 100 * r["others"]))
print()
ds = rows["dsrun (both runs)"]
torch_rows = [(k, v) for k, v in rows.items() if k.startswith("torch")]
ds_rows = [(k, v) for k, v in rows.items() if k in ("dsrun (both runs)", knob)]
print("| ratio dsrun / PyTorch | step time | peak RSS |")
print("|---|---|---|")
for dk, dv in ds_rows:
    for k, v in torch_rows:
        print("| %s vs %s | %.2fx | %.2fx |" % (dk, k, dv["med"] / v["med"], dv["rss"] / v["rss"]))
if torch_rows:
    best_t = min(v["med"] for _, v in torch_rows)
    best_r = min(v["rss"] for _, v in torch_rows)
    print()
    for dk, dv in ds_rows:
        st, rs = dv["med"] / best_t, dv["rss"] / best_r
        print("goal, %s against the fastest / smallest PyTorch run: step time %.2fx "
              "(<= 0.75x: %s), peak RSS %.2fx (<= 0.70x: %s)"
              % (dk, st, "met" if st <= 0.75 else "NOT met", rs, "met" if rs <= 0.70 else "NOT met"))
    print("drift: dsrun run 2 / run 1 median = %.3f" % (rows["dsrun2"]["med"] / rows["dsrun1"]["med"]))
    imp = [v["rss_import"] for _, v in torch_rows]
    print("torch RSS after `import torch`, before the model: %.0f MiB" % (min(imp) / 1024))
EOF

if [[ "${TRACE:-1}" != 0 ]]; then
  # Not timed: where dsrun's time goes. GEMM FLOPs per step: forward, dX and
  # dW of every Linear (c_attn, attn.c_proj, c_fc, mlp.c_proj per layer, and
  # the tied lm_head): 3 * 2 * tokens * sum(in * out).
  L=4 C=256 V=256 TOK=1024
  gemm_gflop=$("$py" -c "print(6 * $TOK * ($L * 12 * $C * $C + $C * $V) / 1e9)")
  echo "== 6. dsrun --trace (10 steps, not timed)"
  "$build/tools/dsrun" "$out/bench.dsplan" --data "$data" --steps 10 \
      --trace "$out/trace.json" > "$out/trace.log" 2>&1
  "$py" "$root/bench/trace_summary.py" "$out/trace.json" --skip-steps 2 \
      --gemm-gflop "$gemm_gflop" --markdown
fi
echo
echo "files: $out"
