#!/usr/bin/env bash
# Builds dsc's libFuzzer targets (test/fuzz; clang-19, ASan + UBSan:
# scripts/sanitized-build.sh) and runs each for SECONDS on its seed corpus.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS: per target (default 60). TARGETs: PlanFuzzer SafetensorsFuzzer
# DataFuzzer ConfigFuzzer MlirInputFuzzer (default: all). The seed corpora
# (test/fuzz/corpus/TARGET) are read, never written: new inputs go to
# FUZZ_BUILD_DIR/corpus/TARGET, crashes to FUZZ_BUILD_DIR/artifacts. Prints
# one line per target: runs, coverage, corpus size, and "clean" or the
# crash file. Exit status 1 when any target found a crash or a leak.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] ||
  targets=(PlanFuzzer SafetensorsFuzzer DataFuzzer ConfigFuzzer MlirInputFuzzer)
"$root/scripts/sanitized-build.sh" "${targets[@]}"

status=0
mkdir -p "$build/artifacts"
for t in "${targets[@]}"; do
  work=$build/corpus/$t
  mkdir -p "$work"
  log=$build/$t.log
  # A target's dictionary (test/fuzz/TARGET.dict), where it has one.
  dict=()
  [ -f "$root/test/fuzz/$t.dict" ] && dict=(-dict="$root/test/fuzz/$t.dict")
  # Leaks are reported too (LeakSanitizer, on by default with ASan).
  if "$build/test/fuzz/$t" "${dict[@]}" -max_total_time="$seconds" -timeout=20 \
       -rss_limit_mb=2560 -print_final_stats=1 \
       -artifact_prefix="$build/artifacts/$t-" \
       "$work" "$root/test/fuzz/corpus/$t" >"$log" 2>&1; then
    result=clean
  else
    result="FOUND: $(grep -o 'Test unit written to [^ ]*' "$log" | head -1 | cut -d' ' -f5) (log: $log)"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo ?)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo ?)
  echo "fuzz: $t: ${seconds} s, $runs runs, cov $cov, corpus $(ls "$work" | wc -l) new inputs: $result"
done
exit $status
