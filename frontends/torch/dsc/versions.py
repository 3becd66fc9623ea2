"""The torch and transformers versions dsc's frontend was tested against,
and the one line it prints at import when an installed one is outside
them: torch.export's graphs and Hugging Face's modelling code change
between releases (transformers 4.53's Llama does not export under torch
2.5), and a failure deep inside either should not be the first sign.

TESTED is the one list; pyproject.toml's dependencies and
frontends/torch/requirements.txt repeat it for pip, and
test/torch/versions.test checks that the three agree.
"""
import sys

TESTED = {"torch": ">=2.5,<2.6", "transformers": ">=4.46,<4.48"}


def installed_versions():
    """The installed version of each package of TESTED (absent: not
    installed)."""
    from importlib import metadata
    found = {}
    for name in TESTED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def out_of_range(installed):
    """The line naming the packages of `installed` ({name: version})
    outside TESTED, or None when all are inside (or `packaging` is not
    there to tell)."""
    try:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return None
    outside = []
    for name, version in sorted(installed.items()):
        try:
            # A local build (2.5.1+cpu) is its release.
            inside = Version(version.split("+")[0]) in SpecifierSet(TESTED[name])
        except InvalidVersion:
            inside = False
        if not inside:
            outside.append(f"{name} {version} (tested: {TESTED[name]})")
    if not outside:
        return None
    verb = "is" if len(outside) == 1 else "are"
    return (f"dsc: {' and '.join(outside)} {verb} outside the versions dsc is tested "
            "with; exporting a model may fail")


def warn_if_untested():
    """Prints out_of_range's line for the installed packages to stderr."""
    line = out_of_range(installed_versions())
    if line:
        print(line, file=sys.stderr)
