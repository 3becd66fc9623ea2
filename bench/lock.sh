# Sourced by the benchmark scripts, first thing: re-runs the calling script
# under flock on $DSC_BENCH_LOCK (default /tmp/dsc-build.lock, the lock
# builds take), so a benchmark never shares the cores with a build. An
# empty DSC_BENCH_LOCK skips it, for a caller that holds the lock already.
bench_lock=${DSC_BENCH_LOCK-/tmp/dsc-build.lock}
if [[ -n "$bench_lock" && -z "${DSC_BENCH_LOCKED:-}" ]]; then
  export DSC_BENCH_LOCKED=1
  exec flock "$bench_lock" bash "$0" "$@"
fi
