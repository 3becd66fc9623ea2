"""`python -m dsc export|train|launch ...`: the command chosen by its first
word (export_cli.py, train_cli.py, launch_cli.py). Each command imports only what it needs
(command_line.py holds what they share), so neither imports this one."""
import sys

from .command_line import USAGE_ERROR, last_resort


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("export", "train", "launch"):
        got = f"'{argv[0]}'" if argv else "nothing"
        print(f"python -m dsc: expected export, train or launch, got {got} "
              "(see python -m dsc export --help, python -m dsc train --help)", file=sys.stderr)
        return USAGE_ERROR
    if argv[0] == "launch":
        from .launch_cli import main as launch_main
        return launch_main(argv[1:])
    if argv[0] == "train":
        from .train_cli import main as train_main
        return train_main(argv[1:])
    from .export_cli import export_main
    return last_resort("dsc export", lambda: export_main(argv[1:]))


def train_command():
    """`dsc-train`, as pip installs it (pyproject.toml's entry points)."""
    sys.exit(main(["train"] + sys.argv[1:]))


def launch_command():
    """`dsc-launch`, as pip installs it."""
    sys.exit(main(["launch"] + sys.argv[1:]))
