#!/usr/bin/env python3
"""file_size_limit.py BYTES CMD...: runs CMD (exec, same status) with its
file-size limit (RLIMIT_FSIZE) at BYTES and SIGXFSZ ignored, so that a write
past BYTES fails with EFBIG ("File too large") the way a write to a full
disk fails with ENOSPC. Outputs must be regular files (a device such as
/dev/full is refused up front), so this is how the tests fill a disk."""
import os
import resource
import signal
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__.strip().splitlines()[0])
limit = int(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an ignored signal survives exec
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
os.execvp(sys.argv[2], sys.argv[2:])
