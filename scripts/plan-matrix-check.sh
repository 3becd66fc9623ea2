#!/usr/bin/env bash
# The plans a structural change must leave byte-identical (scripts/
# plan-matrix.sh) against their checked-in SHA-256 sums in
# test/plans/matrix.sha256, and the combinations dsc refuses against
# test/plans/matrix.failures. A change that means to change plans rewrites
# both with --update and says in its commit why the plans changed.
# Usage: scripts/plan-matrix-check.sh DSC [--update]
set -uo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $# = 2 ] && [ "$2" != --update ]; }; then
  echo "usage: scripts/plan-matrix-check.sh DSC [--update]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
sums=$root/test/plans/matrix.sha256
failures=$root/test/plans/matrix.failures
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$root/scripts/plan-matrix.sh" "$1" "$work" > /dev/null
(cd "$work" && sha256sum -- *.dsplan) > "$work/sums"
if [ "${2:-}" = --update ]; then
  cp "$work/sums" "$sums"
  cp "$work/failures" "$failures"
  echo "plan-matrix-check: wrote $(wc -l < "$sums") sums to $sums"
  exit 0
fi
status=0
if ! diff -q "$sums" "$work/sums" > /dev/null; then
  echo "plan-matrix-check: plans differ from $sums:"
  diff "$sums" "$work/sums" | grep '^>' | awk '{print "  " $3}'
  status=1
fi
if ! diff -u "$failures" "$work/failures"; then
  echo "plan-matrix-check: the combinations dsc refuses changed (above)"
  status=1
fi
[ $status = 0 ] && echo "plan-matrix-check: $(wc -l < "$sums") plans unchanged"
exit $status
