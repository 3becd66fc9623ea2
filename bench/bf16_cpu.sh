#!/usr/bin/env bash
# bf16 training on the CPU (issue 32): dsrun's bf16 plan with its products
# widened to sgemm (DSC_BF16_GEMM=widen) and native through oneDNN
# (DSC_BF16_GEMM=onednn), its fp32 plan, and PyTorch eager and
# torch.compile in fp32 and under bf16 autocast, interleaved ROUNDS times
# so that a shared machine's drift hits every row alike.
#
#   bash bench/bf16_cpu.sh [OUT_DIR]
#
# Model (SIZE): `small` is bench/gpt2_cpu.sh's small GPT (4 layers, d 256,
# T 128, byte vocabulary, micro-batch 8); `gpt2` is GPT-2 124M (12 layers,
# d 768, vocabulary 50257) at micro-batch 2, T 512 (issue 32's second
# benchmark). AdamW, clipping 1.0, 4 MB of seeded random bytes. PyTorch
# is build/venv's (torch 2.5, scripts/install-python.sh): Debian's 1.13
# has no torch.compile. Prints the median step over every
# round's measured steps, tokens/s and each row's ratio to the fastest
# PyTorch row of its precision. Builds nothing; holds $DSC_BENCH_LOCK
# (bench/lock.sh). Knobs: SIZE (small), STEPS (20), WARMUP (5), ROUNDS (2),
# BUILD_DIR, TORCH=0 (dsrun rows only), MKL_VENV (a virtual environment
# with the `mkl` wheel: adds the fp32 row with oneMKL's sgemm,
# DSC_BLAS=mkl; the plain fp32 row runs OpenBLAS, DSC_BLAS=openblas, and
# dsrun-fp32-auto what dsrun takes by default on this CPU: Blas.cpp).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-bf16-cpu-bench}
steps=${STEPS:-20}
warmup=${WARMUP:-5}
rounds=${ROUNDS:-2}
py=$build/venv/bin/python
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in "$build/tools/dsc" "$build/tools/dsrun"; do
  [[ -x "$tool" ]] || { echo "bf16_cpu.sh: $tool missing (build first)" >&2; exit 2; }
done
if [[ "${TORCH:-1}" != 0 ]] && ! "$py" -c "import torch" 2>/dev/null; then
  echo "bf16_cpu.sh: $py cannot import torch (scripts/install-python.sh $build/venv)" >&2
  exit 2
fi

case ${SIZE:-small} in
  small) L=4 H=4 D=256 T=128 V=256 MB=8 ;;
  gpt2) L=12 H=12 D=768 T=512 V=50257 MB=2 ;;
  *) echo "bf16_cpu.sh: SIZE=$SIZE: expected small or gpt2" >&2; exit 2 ;;
esac
model=gpt2:n_layer=$L,n_head=$H,n_embd=$D,block_size=$T,vocab_size=$V,dropout=0
for p in fp32 bf16; do
  extra=""
  [[ $p == bf16 ]] && extra=', "bf16": {"enabled": true}'
  echo "{\"train_micro_batch_size_per_gpu\": $MB, \"gradient_clipping\": 1.0, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"betas\": [0.9, 0.95], \"eps\": 1e-8, \"weight_decay\": 0.1}}$extra}" > "$out/$p.json"
  "$build/tools/dsc" --model "$model" --config "$out/$p.json" -o "$out/$p.dsplan" --report > "$out/$p.report"
done
data=$out/random.bytes
[[ -s $data ]] || python3 -c "import random,sys; random.seed(1337); sys.stdout.buffer.write(random.randbytes(4_000_000))" > "$data"

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;" \
  "$(grep -o -E 'avx512_bf16|amx_bf16|avx512f' /proc/cpuinfo | sort -u | paste -sd' ')"
dsrun_row() { # name plan env...
  local name=$1 plan=$2; shift 2
  env "$@" "$build/tools/dsrun" "$out/$plan.dsplan" --data "$data" \
    --steps $((warmup + steps)) --metrics "$out/$name.$r.jsonl" > "$out/$name.$r.log" 2>&1
}
torch_row() { # name args...
  local name=$1; shift
  # A baseline that fails (torch 2.5's inductor cannot build its bf16 C++
  # kernels with some compilers) is reported as such, not fatal.
  OMP_WAIT_POLICY=PASSIVE "$py" "$root/bench/torch_gpt2.py" --data "$data" \
    --steps "$steps" --warmup "$warmup" --n-layer $L --n-head $H --n-embd $D \
    --block-size $T --vocab-size $V --batch $MB "$@" > "$out/$name.$r.json" 2> "$out/$name.$r.err" ||
    echo "$name (round $r) failed: $(grep -m1 -E 'Error|error:' "$out/$name.$r.err" | cut -c1-160)" | tee -a "$out/failed.txt"
}
rm -f "$out/failed.txt"
for r in $(seq "$rounds"); do
  echo "== round $r"
  dsrun_row dsrun-fp32 fp32 DSC_BLAS=openblas
  dsrun_row dsrun-fp32-auto fp32 DSC_BLAS=auto
  if [[ -n "${MKL_VENV:-}" ]]; then
    dsrun_row dsrun-fp32-mkl fp32 DSC_BLAS=mkl VIRTUAL_ENV="$MKL_VENV"
  fi
  dsrun_row dsrun-bf16-widen bf16 DSC_BF16_GEMM=widen
  dsrun_row dsrun-bf16-onednn bf16 DSC_BF16_GEMM=onednn
  if [[ "${TORCH:-1}" != 0 ]]; then
    torch_row torch-eager-fp32
    torch_row torch-eager-bf16 --bf16
    torch_row torch-compile-fp32 --compile
    torch_row torch-compile-bf16 --compile --bf16
  fi
done

python3 - "$out" "$rounds" "$warmup" $((MB * T)) <<'PY'
import json, os, statistics, sys
out, rounds, warmup, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = {}
for name in ["dsrun-fp32", "dsrun-fp32-auto", "dsrun-fp32-mkl", "dsrun-bf16-widen", "dsrun-bf16-onednn", "torch-eager-fp32",
             "torch-eager-bf16", "torch-compile-fp32", "torch-compile-bf16"]:
    times, loss = [], None
    for r in range(1, rounds + 1):
        if name.startswith("dsrun"):
            if not os.path.exists(f"{out}/{name}.{r}.jsonl"):
                continue
            recs = [json.loads(l) for l in open(f"{out}/{name}.{r}.jsonl")]
            times += [x["step_s"] for x in recs[warmup:]]
            loss = recs[-1]["loss"]
        elif os.path.exists(f"{out}/{name}.{r}.json") and open(f"{out}/{name}.{r}.json").read().strip():
            j = json.loads(open(f"{out}/{name}.{r}.json").read().strip().splitlines()[-1])
            times.append(j["median_step_s"])
            loss = j["last_loss"]
    if times:
        rows[name] = (statistics.median(times), loss)
print("\n| run | median step (ms) | tokens/s | last loss | vs fastest PyTorch of its precision |")
print("|---|---|---|---|---|")
for name, (med, loss) in rows.items():
    prec = name.split("-")[1] if name.startswith("dsrun") else name.split("-")[2]
    torch_best = [v[0] for k, v in rows.items() if k.startswith("torch") and k.endswith(prec)]
    ratio = "%.2fx" % (med / min(torch_best)) if torch_best else "-"
    print(f"| {name} | {med * 1e3:.1f} | {tokens / med:.0f} | {loss:.4f} | {ratio} |")
if "dsrun-bf16-widen" in rows and "dsrun-bf16-onednn" in rows:
    print("\ndsrun bf16: oneDNN / widened step time = %.2fx" %
          (rows["dsrun-bf16-onednn"][0] / rows["dsrun-bf16-widen"][0]))
PY
