"""deep_args.py DEPTH ARGS...: `python -m dsc ARGS...` with each DEEP in
ARGS replaced by {"a": [[...]]}, lists nested DEPTH deep (lit's shell has
no command substitution to build it)."""
import sys

from dsc.cli import main

depth = int(sys.argv[1])
deep = '{"a": ' + "[" * depth + "]" * depth + "}"
sys.exit(main([deep if a == "DEEP" else a for a in sys.argv[2:]]))
