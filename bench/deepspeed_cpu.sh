#!/usr/bin/env bash
# dsrun against DeepSpeed on the CPU, 2 ranks on this machine, ZeRO stages
# 0 and 3, the same small GPT and the same DeepSpeed config on both sides.
#
#   bash bench/deepspeed_cpu.sh [OUT_DIR]   # default: /tmp/dsc-deepspeed-cpu-bench
#
# Model: gpt2 n_layer=4 n_head=4 n_embd=256 block_size=128 vocab_size=256
# dropout=0 (bench/torch_gpt2.py's GPT on the DeepSpeed side), micro-batch 4
# per rank, no gradient accumulation, clipping 1.0, AdamW lr 1e-3 betas
# 0.9/0.95 eps 1e-8 weight decay 0.1 (matrices only), "zero_optimization":
# {"stage": S, "reduce_bucket_size": 500000,
# "stage3_param_persistence_threshold": 10000}: bench/zero_cpu.sh's config.
# For each stage: dsc --world-size 2, then dsrun --np 2 (one thread a rank,
# docs/multi-process.md), then bench/deepspeed_gpt.py under torchrun with 2
# processes (DS_ACCELERATOR=cpu, gloo, one thread a rank; the config's
# AdamW, which DeepSpeed builds as FusedAdam, a JIT-compiled CPU op).
# ROUNDS of that, interleaved, so a shared machine's drift hits both sides.
# Each side's step time is the median of rank 0's measured steps (after
# WARMUP) over all rounds, a barrier-free wall clock per step on both sides;
# peak RSS is each rank's high-water mark (dsrun's VmHWM, DeepSpeed's
# ru_maxrss). Prints the first losses of both sides and checks that both
# start near ln(256) = 5.55 and fall.
#
# DeepSpeed is not in build/venv; install it beside it, leaving the venv's
# torch (2.5.1) and numpy alone:
#   build/venv/bin/python -m pip install --target /tmp/dspkgs --no-deps \
#     --no-build-isolation deepspeed einops hjson msgpack ninja py-cpuinfo
# (its other requirements, packaging psutil pydantic tqdm, are in the venv).
#
# Knobs: STEPS (20), WARMUP (5), ROUNDS (2), BUILD_DIR, DATA (GPL-3 text),
# MKL_VENV (a virtual environment with the `mkl` wheel: adds dsrun rows with
# oneMKL's sgemm, DSC_BLAS=mkl, as PyTorch's own GEMMs are; the plain dsrun
# rows run OpenBLAS, DSC_BLAS=openblas, the dsrun-auto rows what dsrun takes
# by default on this CPU: oneDNN's f32 matmul on an AMD CPU with AVX-512),
# DS_PKGS (/tmp/dspkgs, put on PYTHONPATH), TORCH_EXTENSIONS_DIR (where
# DeepSpeed's JIT ops are built, once; default OUT_DIR/torch-extensions),
# DS_TORCH_ADAMW=1 (DeepSpeed runs torch.optim.AdamW as a client optimizer).
# Builds nothing of dsc; holds $DSC_BENCH_LOCK (bench/lock.sh), which also
# covers DeepSpeed's first-run JIT compile (untimed: it happens at init).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-deepspeed-cpu-bench}
steps=${STEPS:-20}
warmup=${WARMUP:-5}
rounds=${ROUNDS:-2}
data=${DATA:-/usr/share/common-licenses/GPL-3}
ds_pkgs=${DS_PKGS:-/tmp/dspkgs}
py=$build/venv/bin/python
model=gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0
mkdir -p "$out"
out=$(cd "$out" && pwd)
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$out/torch-extensions}

for tool in "$build/tools/dsc" "$build/tools/dsrun"; do
  [[ -x "$tool" ]] || { echo "deepspeed_cpu.sh: $tool missing (build first)" >&2; exit 2; }
done
# DeepSpeed's side: the venv's torch, DeepSpeed from DS_PKGS, the CPU
# accelerator (without oneCCL its communication backend is gloo).
ds_env=(env DS_ACCELERATOR=cpu PYTHONPATH="$ds_pkgs${PYTHONPATH:+:$PYTHONPATH}"
        PATH="$ds_pkgs/bin:$PATH" OMP_NUM_THREADS=1)
if ! "${ds_env[@]}" "$py" -c "import deepspeed" > /dev/null 2>&1; then
  echo "deepspeed_cpu.sh: $py cannot import deepspeed from $ds_pkgs (see the header)" >&2
  exit 2
fi
ds_flags=()
[[ "${DS_TORCH_ADAMW:-0}" != 0 ]] && ds_flags+=(--torch-adamw)
variants=(dsrun dsrun-auto)
[[ -n "${MKL_VENV:-}" ]] && variants+=(dsrun-mkl)
dsrun_env() { # variant: the BLAS library its GEMMs run on
  case $1 in
    dsrun) echo DSC_BLAS=openblas ;;
    dsrun-auto) echo DSC_BLAS=auto ;;
    dsrun-mkl) echo DSC_BLAS=mkl VIRTUAL_ENV="$MKL_VENV" ;;
  esac
}

for s in 0 3; do
  cat > "$out/ds_config.s$s.json" <<EOF
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 1,
  "gradient_clipping": 1.0,
  "optimizer": {
    "type": "AdamW",
    "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
  },
  "zero_optimization": {"stage": $s, "reduce_bucket_size": 500000,
                        "stage3_param_persistence_threshold": 10000}
}
EOF
  "$build/tools/dsc" --model "$model" --config "$out/ds_config.s$s.json" \
    --world-size 2 -o "$out/s$s.dsplan" --report > "$out/s$s.report.txt"
done

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;" \
  "$(grep -o -E 'avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | paste -sd' ')"
echo "deepspeed $("${ds_env[@]}" "$py" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null)," \
  "torch $("$py" -c 'import torch; print(torch.__version__)'), $(date -u '+%Y-%m-%d %H:%M UTC')"

for r in $(seq "$rounds"); do
  for s in 0 3; do
    tag=s$s.$r
    for v in "${variants[@]}"; do
      rm -f "$out/$v.$tag.metrics"*.jsonl
      # shellcheck disable=SC2046 # the variant's VAR=value words
      env $(dsrun_env "$v") "$build/tools/dsrun" "$out/s$s.dsplan" --np 2 \
        --data "$data" --steps $((warmup + steps)) \
        --metrics "$out/$v.$tag.metrics.jsonl" > "$out/$v.$tag.log" 2>&1
    done
    # --standalone: torchrun picks a free port, so a leftover job cannot clash.
    "${ds_env[@]}" "$py" -m torch.distributed.run --standalone --nproc_per_node 2 \
      "$root/bench/deepspeed_gpt.py" --config "$out/ds_config.s$s.json" --data "$data" \
      --steps "$steps" --warmup "$warmup" --threads 1 "${ds_flags[@]}" \
      > "$out/deepspeed.$tag.log" 2>&1 ||
      { echo "deepspeed_cpu.sh: DeepSpeed stage $s failed, see $out/deepspeed.$tag.log" >&2; exit 1; }
    grep '^{"impl": "deepspeed"' "$out/deepspeed.$tag.log" | tail -1 > "$out/deepspeed.$tag.json"
    echo "round $r stage $s done" >&2
  done
done

python3 - "$out" "$rounds" "$warmup" "${variants[@]}" <<'PY'
import json, math, statistics, sys
out, rounds, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
variants = sys.argv[4:]
MiB = 2**20


def dsrun(variant, stage):
    """rank 0's measured step times over all rounds, peak RSS per rank, losses."""
    times, per_round, peak, base, losses = [], [], [0, 0], [0, 0], None
    for r in range(1, rounds + 1):
        stem = f"{out}/{variant}.s{stage}.{r}.metrics"
        for k, path in enumerate([stem + ".jsonl", stem + ".rank1.jsonl"]):
            recs = [json.loads(l) for l in open(path) if l.strip()]
            peak[k] = max(peak[k], max(x["rss_peak_bytes"] for x in recs))
            base[k] = max(base[k], recs[0]["rss_baseline_bytes"])
            if k == 0:
                times += [x["step_s"] for x in recs[warmup:]]
                per_round.append(statistics.median(x["step_s"] for x in recs[warmup:]))
                tokens = recs[0]["tokens"]  # cumulative, all ranks: step 1 holds one step's
                losses = losses or [x["loss"] for x in recs]
    return times, per_round, tokens, peak, base, losses


def deepspeed(stage):
    """Same, from rank 0's JSON line; the losses and optimizer of round 1."""
    times, per_round, peak, base, rounds_j = [], [], [0, 0], [0, 0], []
    for r in range(1, rounds + 1):
        j = json.loads(open(f"{out}/deepspeed.s{stage}.{r}.json").read())
        rounds_j.append(j)
        times += j["step_s"]
        per_round.append(j["median_step_s"])
        peak = [max(a, b * 1024) for a, b in zip(peak, j["peak_rss_kib"])]
        base = [max(a, b * 1024) for a, b in zip(base, j["rss_baseline_kib"])]
    return times, per_round, j["tokens_per_step"], peak, base, rounds_j[0]


def mib(pair):
    return " / ".join(f"{b / MiB:.0f}" for b in pair)


rows, notes, ok = [], [], True
for s in (0, 3):
    st, sround, stok, speak, sbase, sj = deepspeed(s)
    sm = statistics.median(st)
    ds_first = sj["first_losses"]
    n = len(ds_first)
    checks = [("DeepSpeed", ds_first)]
    # A round far off the others means something else shared the cores.
    rounds_note = "; DeepSpeed " + " ".join(f"{x * 1e3:.1f}" for x in sround)
    for v in variants:
        dt, dround, dtok, dpeak, dbase, dloss = dsrun(v, s)
        dm = statistics.median(dt)
        rows.append(f"| {s} | {v} | {dm * 1e3:.1f} | {sm * 1e3:.1f} | {dm / sm:.2f}x "
                    f"| {dtok / dm:.0f} | {stok / sm:.0f} | {mib(dpeak)} | {mib(speak)} |")
        rounds_note = f", {v} " + " ".join(f"{x * 1e3:.1f}" for x in dround) + rounds_note
        checks.append((v, dloss[:n]))
    notes.append(f"stage {s}: median step ms per round" + rounds_note)
    notes.append(f"stage {s}: RSS before the model/arenas (rank 0 / 1), dsrun "
                 f"{mib(dbase)} MiB, DeepSpeed {mib(sbase)} MiB; DeepSpeed ran "
                 f"{sj['optimizer']} over {sj['inner_optimizer']}, backend {sj['backend']}, "
                 f"{sj['threads']} thread(s) a rank")
    notes.append(f"stage {s}: first losses (mean over ranks), " + "; ".join(
        f"{name} " + " ".join(f"{x:.3f}" for x in ls) for name, ls in checks))
    for name, ls in checks:
        # Untrained byte model: loss ln(256); both must then learn.
        if abs(ls[0] - math.log(256)) > 0.3 or not ls[-1] < ls[0] - 0.2:
            notes.append(f"LOSS CHECK FAILED: stage {s} {name}: {ls}")
            ok = False
print("\n| ZeRO stage | run | dsrun step ms (median) | DeepSpeed step ms (median) | dsrun / DeepSpeed "
      "| dsrun tokens/s | DeepSpeed tokens/s | dsrun peak RSS MiB (rank 0 / 1) "
      "| DeepSpeed peak RSS MiB (rank 0 / 1) |")
print("|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
print()
print("\n".join(notes))
print("loss check: " + ("ok (both start near ln 256 = 5.545 and fall)" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
