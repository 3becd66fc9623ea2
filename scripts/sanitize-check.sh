#!/usr/bin/env bash
# The runtime's unit tests under AddressSanitizer and UndefinedBehavior-
# Sanitizer (scripts/sanitized-build.sh, shared with the fuzz targets): the
# kernel conformance suite, plans and sessions, dsrun's tooling, the
# reference kernels, kernel signatures and the communicators in one process.
# The mpirun-launched cases stay with the normal build: OpenMPI's own
# allocations would drown the leak report. Exit status 1 if any binary
# fails (a test, a sanitizer report).
#
#   bash scripts/sanitize-check.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
tests=(RefKernelsTest KernelSignatureTest KernelConformanceTest PlanTest
       DsrunUnitTest CommTest)
"$root/scripts/sanitized-build.sh" "${tests[@]}"
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for t in "${tests[@]}"; do
  bin=$(find "$build/test" -name "$t" -type f -perm -u+x | head -1)
  log=$build/$t.sanitize.log
  if (cd "$build" && "$bin" --gtest_brief=1) >"$log" 2>&1; then
    echo "sanitize: $t: $(grep -o 'PASSED  \] [0-9]*' "$log" | tail -1 |
                            grep -o '[0-9]*$') tests passed"
  else
    echo "sanitize: $t FAILED (log: $log)"
    tail -30 "$log"
    status=1
  fi
done
exit $status
