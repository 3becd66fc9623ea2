#!/usr/bin/env bash
# The house rule on function size (issue 28 item 5): no function over 150
# lines or cyclomatic complexity over 40 in compiler/, passes/, dialects/,
# runtime/, frontends/ and models/, as lizard measures them (its C/C++ and
# Python readers: the .cpp/.h sources, CUDA's .cu/.cuh, frontends' Python).
# lizard has no reader of its own for .cu/.cuh; CUDA sources are C++ with
# launch syntax, so this check hands them to its C/C++ reader. TableGen's
# .td files (C++ in code blocks) are not read. Exits 1 with one line per
# function over a limit, e.g.
#   compiler/plan/X.cpp:85: warning: f has 280 NLOC, 72 CCN, ... 305 length
# lizard comes from the Python index into the build venv
# (scripts/check-requirements.txt, installed by scripts/install-python.sh).
# Usage: scripts/lizard-check.sh [VENV]   (default: build/venv)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$root/build/venv}
if ! "$venv/bin/python" -c 'import lizard' 2>/dev/null; then
  "$root/scripts/install-python.sh" "$venv"
fi
dirs=(compiler passes dialects runtime frontends models)
cd "$root"
"$venv/bin/python" - "${dirs[@]}" <<'PY'
import sys

import lizard
from lizard_languages import CLikeReader

CLikeReader.ext = CLikeReader.ext + ["cu", "cuh"]
sys.exit(lizard.main(["lizard", "-C", "40", "-L", "150", "-w"] + sys.argv[1:]))
PY
echo "lizard-check: no function over 150 lines or CCN 40 in ${dirs[*]}"
