#!/usr/bin/env bash
# The GPU machine's check (docs/cuda.md): builds the runtime there with the
# CUDA backend (no MLIR, MPI, OpenBLAS or network there: scripts/
# device-prepare.sh put what the build needs and the plans under device/),
# runs the CUDA conformance suite, the CUDA-vs-CPU equivalence runs and the
# GPU benchmark, and writes everything with a summary to $OUT.
#
#   (here)   bash scripts/device-prepare.sh
#   (device) run command="bash scripts/device-check.sh" carry=["device"]
#
# Budget: under 8 minutes on 16 cores (each GPU stage has a timeout, exit
# 124 when it hits it). Each stage records its own result; a failing stage
# does not stop the later ones. DEVICE_CHECK_TORCH=0 skips the PyTorch
# runs (a rerun in the same session, when they were measured already);
# DEVICE_CHECK_NCU=1 adds an Nsight Compute profile of the attention
# kernels (where the machine lets ncu read the counters);
# DEVICE_CHECK_SANITIZER=0 skips compute-sanitizer (which otherwise runs
# only if the stages before it ended within DEVICE_CHECK_SANITIZER_AFTER
# seconds, 400 unless set) and
# DEVICE_CHECK_BENCH_STEPS=N times N steps instead of 30 (a short last
# rerun); DEVICE_CHECK_AB (below) adds a traced run with a variable set;
# DEVICE_CHECK_FUSED and DEVICE_CHECK_FUSED_ROUNDS (below) choose the
# fused-head comparisons.
#
# The device tool brings back at most 8 files from $OUT, so the logs are
# written to a work folder and $OUT holds two: summary.md and logs.tar.gz,
# the work folder packed again after every stage (a run killed at its limit
# still brings back everything up to the last finished stage). The summary
# is also printed whole at the end, where the tool's output tail shows it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dev=$root/device
final=${OUT:-$root/out/device-check}
out=${DEVICE_WORK_DIR:-$root/out/device-check-work}
build=${DEVICE_BUILD_DIR:-$root/build-gpu}
rm -rf "$out"
mkdir -p "$out" "$final"
summary=$out/summary.md
start=$(date +%s)
pack() {
  cp "$summary" "$final/summary.md"
  tar -czf "$final/logs.tar.gz.part" -C "$out" . && mv -f "$final/logs.tar.gz.part" "$final/logs.tar.gz"
}
note() { echo "$*" | tee -a "$summary"; }
lap() { note "- $1 ($(( $(date +%s) - start )) s)"; pack; }

[ -d "$dev/plans" ] || { echo "device-check: no $dev (run scripts/device-prepare.sh and carry device/)" >&2; exit 2; }
: > "$summary"
note "# device check $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -2; } > "$out/machine.txt" 2>&1
note "- GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# 1. Build: the runtime only, CUDA for this machine's GPU.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
case "$arch" in 90) arch=90a ;; "") arch="80;90a" ;; esac
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DDSC_BUILD_COMPILER=OFF -DDSC_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
  -DDSC_REQUIRE_MPI=OFF -DDSC_REQUIRE_OPENBLAS=OFF \
  -DDSC_GTEST_SOURCE_DIR="$dev/googletest" \
  -DDSC_PLAN_GENERATED_HEADER="$dev/plan_generated.h" \
  -DCMAKE_PREFIX_PATH="$dev" \
  -DCMAKE_CXX_FLAGS="-isystem $dev/include" \
  -DCMAKE_CUDA_FLAGS="-isystem $dev/include" ${DEVICE_CMAKE_ARGS:-} > "$out/configure.log" 2>&1 &&
ninja -C "$build" -j "$(nproc)" dsrun KernelConformanceTest > "$out/build.log" 2>&1
status=$?
lap "build (sm_$arch): $([ $status = 0 ] && echo ok || echo "FAILED, see build.log")"
[ $status = 0 ] || { tail -30 "$out/configure.log" "$out/build.log" 2>/dev/null; exit 1; }

# 2. The conformance suite's CUDA instance, and the table checks.
conformance=$build/test/unit/KernelConformanceTest
timeout 120 "$conformance" --gtest_filter='*/cuda:BackendKernelTables.*:CudaHostChecks.*' \
  --gtest_output="xml:$out/conformance.xml" > "$out/conformance.txt" 2>&1
conformance_rc=$?
lap "conformance: exit $conformance_rc; $(grep -E '^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+|tests? from .* ran' "$out/conformance.txt" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$out/conformance.txt" | head -20 | sed 's/^/  /' | tee -a "$summary"
# 3. Equivalence: the plans dsc compiled on the development machine, 20
# steps on CUDA against the CPU backend's losses for the same runs.
dsrun=$build/tools/dsrun
while read -r name steps cfg; do
  plan=$dev/plans/$name.dsplan
  timeout 45 "$dsrun" "$plan" --backend cuda --data "$dev/plans/corpus.txt" --steps "$steps" \
    --seed 7 --metrics "$out/$name.cuda.jsonl" > "$out/$name.cuda.log" 2>&1
  rc=$?
  result=$(python3 "$root/scripts/compare_losses.py" "$dev/plans/$name.cpu.jsonl" \
             "$out/$name.cuda.jsonl" "$cfg" 2>&1)
  lap "equivalence $name: exit $rc; $result$([ $rc = 0 ] || echo "; $(tail -1 "$out/$name.cuda.log")")"
  # A kernel fault surfaces at a later launch check; rerun a failure with
  # every launch synchronous so the instruction named is the one at fault.
  if [ $rc != 0 ] && [ $rc != 124 ]; then
    CUDA_LAUNCH_BLOCKING=1 timeout 30 "$dsrun" "$plan" --backend cuda:graphs=off --data "$dev/plans/corpus.txt" \
      --steps "$steps" --seed 7 > "$out/$name.blocking.log" 2>&1
    note "  - rerun with CUDA_LAUNCH_BLOCKING=1, graphs off: exit $?; $(tail -1 "$out/$name.blocking.log")"
  fi
done < "$dev/plans/runs.txt"
# Graph replay changes no bit: gpt2 fp32 kernel by kernel equals the run
# above (eager first run, then the captured graph).
timeout 60 "$dsrun" "$dev/plans/gpt2-fp32.dsplan" --backend cuda:graphs=off --data "$dev/plans/corpus.txt" \
  --steps 20 --seed 7 --metrics "$out/gpt2-fp32.nographs.jsonl" > "$out/gpt2-fp32.nographs.log" 2>&1
rc=$?
lap "graphs=off vs graphs, gpt2-fp32: exit $rc; $(python3 "$root/scripts/compare_losses.py" \
  "$out/gpt2-fp32.cuda.jsonl" "$out/gpt2-fp32.nographs.jsonl" exact 2>&1)"
# Sampling: gpt2-fp32's one-row sampling programs (a position-picked
# head) on CUDA draw the CPU's text (temperature 1, seed 7) from the
# same trained weights.
timeout 60 "$dsrun" "$dev/plans/gpt2-fp32.dsplan" --backend cuda \
  --init-from "$dev/plans/gpt2-fp32.sample.safetensors" --sample 96 \
  --prompt "This program is free software: you can r" --temperature 1 --seed 7 \
  2> "$out/sample.cuda.err" | tail -n +2 > "$out/sample.cuda.txt"
rc=${PIPESTATUS[0]}
lap "sampling gpt2-fp32 on cuda: exit $rc; $(cmp -s "$dev/plans/gpt2-fp32.sample.cpu.txt" \
  "$out/sample.cuda.txt" && echo "the CPU's text" || echo "NOT the CPU's text"); $(tail -1 "$out/sample.cuda.err")"

# 4. The benchmark: GPT-2 124M bf16, block 1024, at the largest prepared
# micro-batch whose predicted device memory is under 85% of this GPU's,
# dsrun against PyTorch eager and torch.compile at the same micro-batch.
gpu_bytes=$(( $(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 || echo 0) * 1048576 ))
batch=16
while read -r b bytes; do
  [ -n "$bytes" ] && [ $(( bytes * 100 )) -le $(( gpu_bytes * 85 )) ] && batch=$b
done < "$dev/plans/bench.txt"
bench_plan=$dev/plans/gpt2-124m-bf16-b$batch.dsplan
note "- benchmark micro-batch $batch ($(awk -v b="$batch" '$1 == b { printf "%.1f GiB", $2 / 2^30 }' "$dev/plans/bench.txt") predicted, GPU $(( gpu_bytes >> 30 )) GiB)"
# Device memory in use, sampled every 200 ms while dsrun runs, against
# dsc's prediction (which counts the plan's arenas; the CUDA context,
# cuBLASLt, NCCL and the per-stream workspaces come on top).
used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
idle_mib=$(used_mib)
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$out/bench.memory.txt" 2>/dev/null &
sampler=$!
timeout 150 "$dsrun" "$bench_plan" --backend cuda --data "$dev/plans/corpus.txt" \
  --steps "${DEVICE_CHECK_BENCH_STEPS:-30}" --metrics "$out/bench.dsrun.jsonl" > "$out/bench.dsrun.log" 2>&1
rc=$?
kill "$sampler" 2> /dev/null; wait "$sampler" 2> /dev/null
lap "dsrun gpt2-124m bf16 (graphs): exit $rc; $(grep -E '^done:|device peak in use' "$out/bench.dsrun.log" | tr '\n' ' ' || true)$([ $rc = 0 ] || tail -1 "$out/bench.dsrun.log")"
peak_mib=$(sort -n "$out/bench.memory.txt" 2> /dev/null | tail -1)
[ -n "$peak_mib" ] && [ -n "$idle_mib" ] &&
  note "- device memory: peak $(awk -v p="$peak_mib" -v i="$idle_mib" 'BEGIN { printf "%.2f", (p > i ? p - i : 0) / 1024 }') GiB in use above idle; dsc predicted $(awk -v b="$batch" '$1 == b { printf "%.2f", $2 / 2^30 }' "$dev/plans/bench.txt") GiB for the plan's buffers"
timeout 60 "$dsrun" "$bench_plan" --backend cuda --data "$dev/plans/corpus.txt" \
  --steps 4 --trace "$out/bench.trace.json" > "$out/bench.trace.log" 2>&1
# The GEMM and attention shares and the gaps between kernels (the trace
# runs kernel by kernel: graphs are off while tracing).
[ -s "$out/bench.trace.json" ] &&
  python3 "$root/bench/trace_summary.py" "$out/bench.trace.json" --markdown \
    > "$out/bench.trace.md" 2>&1 && lap "trace summary: bench.trace.md"
# DEVICE_CHECK_AB="NAME=VALUE": the same traced run again with that
# variable set (a runtime switch such as DSC_CUDA_ATTENTION_SYNC=block), so
# a change is measured against its alternative on one machine in one run.
if [ -n "${DEVICE_CHECK_AB:-}" ]; then
  env "$DEVICE_CHECK_AB" timeout 60 "$dsrun" "$bench_plan" --backend cuda --data "$dev/plans/corpus.txt" \
    --steps 4 --trace "$out/bench.trace-ab.json" > "$out/bench.trace-ab.log" 2>&1
  [ -s "$out/bench.trace-ab.json" ] &&
    python3 "$root/bench/trace_summary.py" "$out/bench.trace-ab.json" --markdown \
      > "$out/bench.trace-ab.md" 2>&1
  lap "trace with $DEVICE_CHECK_AB: bench.trace-ab.md; attention $(grep -E '^\| attention' "$out/bench.trace-ab.md" | cut -d'|' -f3) ms/step against $(grep -E '^\| attention' "$out/bench.trace.md" | cut -d'|' -f3) without"
fi
# The fused LM head against the five unfused ops, each pair of fused.txt
# alternated (unfused, fused, ...) DEVICE_CHECK_FUSED_ROUNDS times (2
# unless set); DEVICE_CHECK_FUSED (a grep pattern) picks pairs.
while read -r pair; do
  echo "$pair" | grep -qE "${DEVICE_CHECK_FUSED:-.}" || continue
  for round in $(seq "${DEVICE_CHECK_FUSED_ROUNDS:-2}"); do
    for fuse in false true; do
      log=$out/$pair-fuse-$fuse.$round.log
      timeout 60 "$dsrun" "$dev/plans/$pair-fuse-$fuse.dsplan" --backend cuda \
        --data "$dev/plans/corpus.txt" --steps 8 > "$log" 2>&1
      rc=$?
      lap "$pair fuse-lm-head=$fuse: exit $rc; $(grep -E '^done:|device peak in use' "$log" | tr '\n' ' ')"
    done
  done
done < <(cat "$dev/plans/fused.txt" 2> /dev/null)

# What the runtime noted (a program left uncaptured, an epilogue run
# unfused): each is a path the results above did not take.
grep -h 'dsrun: note:' "$out"/*.log 2> /dev/null | sort | uniq -c | head -12 | sed 's/^/  /' | tee -a "$summary"
for mode in $([ "${DEVICE_CHECK_TORCH:-1}" = 0 ] || echo "eager --compile"); do
  [ "$mode" = eager ] && mode=
  timeout 240 python3 "$root/bench/gpu_gpt2.py" --batch "$batch" $mode > "$out/bench.torch$mode.json" 2> "$out/bench.torch$mode.log"
  lap "torch ${mode:-eager}: $(tail -1 "$out/bench.torch$mode.json" 2>/dev/null || tail -1 "$out/bench.torch$mode.log")"
done
# 5. Nsight Compute on attention at the benchmark's shapes (micro-batch
# 16, the smallest plan: ncu saves and restores the memory a kernel may
# write for each of its replays): the last layer's forward, then the
# gradient's three programs (statistics, dK and dV, dQ), kernel by kernel.
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
if [ "${DEVICE_CHECK_NCU:-0}" = 1 ] && [ -n "$ncu" ]; then
  timeout 150 "$ncu" --kernel-name regex:runTiles --launch-skip 11 --launch-count 4 \
    --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$dsrun" "$dev/plans/gpt2-124m-bf16-b16.dsplan" --backend cuda:graphs=off \
    --data "$dev/plans/corpus.txt" --steps 1 > "$out/ncu.txt" 2>&1
  lap "ncu attention: exit $?"
  grep -E '^  [a-zA-Z_].*runTiles|Duration|Registers Per Thread|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Local Memory Spilling' \
    "$out/ncu.txt" | cut -c1-160 | head -40 | sed 's/^/  /' | tee -a "$summary"
fi
# 6. compute-sanitizer, where the toolkit has it and time is left (last:
# the results above matter more): racecheck on the attention kernels
# (shared memory shared between phases: a missing barrier shows), and
# memcheck on the failing suites when the suite failed (an access out of
# bounds names the kernel and the address).
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
if [ "${DEVICE_CHECK_SANITIZER:-1}" = 0 ]; then
  lap "compute-sanitizer: skipped (DEVICE_CHECK_SANITIZER=0)"
elif [ $(( $(date +%s) - start )) -gt "${DEVICE_CHECK_SANITIZER_AFTER:-400}" ]; then
  lap "compute-sanitizer: skipped, no time left"
elif [ -n "$sanitizer" ]; then
  timeout 90 "$sanitizer" --tool racecheck --racecheck-report hazard "$conformance" \
    --gtest_filter='*AttentionKernels.GradMatchesReference/cuda:*AttentionKernels.SixteenBitForwardMatchesReference/cuda:*AttentionKernels.SixteenBitGradMatchesReference/cuda' > "$out/racecheck.txt" 2>&1
  lap "racecheck attention: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/racecheck.txt" | tr '\n' ' ')"
  if [ "$conformance_rc" != 0 ]; then
    failing=$(grep -E '^\[  FAILED  \] .*/cuda' "$out/conformance.txt" | sed -E 's/^\[  FAILED  \] ([^ ,]*).*/\1/' | sort -u | head -3 | paste -sd: -)
    timeout 60 "$sanitizer" --tool memcheck "$conformance" --gtest_filter="${failing:-*/cuda}" \
      > "$out/memcheck.txt" 2>&1
    lap "memcheck ${failing:-*/cuda}: exit $?; $(grep -E 'ERROR SUMMARY' "$out/memcheck.txt" | tr '\n' ' ')"
    grep -E '^=+ +(Invalid|Program hit|at )' "$out/memcheck.txt" | head -12 | sed 's/^/  /' | tee -a "$summary"
  fi
else
  lap "compute-sanitizer: not on this machine"
fi

note "- total $(( $(date +%s) - start )) s"
pack
echo; echo "=== summary.md ==="; cat "$summary"
