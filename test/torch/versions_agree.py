"""versions_agree.py PYPROJECT REQUIREMENTS: prints, for each package of
dsc.versions.TESTED, its range when pyproject.toml's dependencies and the
requirements file give it the same range; exits 1 naming the first that
differs."""
import re
import sys
import tomllib

from dsc.versions import TESTED


def ranges(lines):
    found = {}
    for line in lines:
        m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*([<>=!~][^#;]*)", line)
        if m:
            found[m.group(1).lower()] = m.group(2).replace(" ", "").strip()
    return found


def main(pyproject, requirements):
    with open(pyproject, "rb") as f:
        declared = ranges(tomllib.load(f)["project"]["dependencies"])
    with open(requirements) as f:
        listed = ranges(f)
    for name, spec in TESTED.items():
        if declared.get(name) != spec or listed.get(name) != spec:
            print(f"{name}: {spec} in versions.py, {declared.get(name)} in pyproject.toml, "
                  f"{listed.get(name)} in requirements.txt")
            return 1
        print(f"{name} {spec} in pyproject.toml and requirements.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
