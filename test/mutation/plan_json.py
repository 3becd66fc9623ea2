"""Plans as JSON: a FlatBuffers round trip through flatc, and the lookups
the mutations need (buffers' byte ranges, variables, instructions).

  plan = plan_json.load(schema, "plan.dsplan", workdir)   # -> dict
  ... edit plan ...
  plan_json.save(schema, plan, "mutant.dsplan", workdir)

flatc is run with --defaults-json, so every scalar field is present in the
dict (enum fields by name: "f32", "compute", "activations", ...); vectors a
plan leaves unset may still be missing, which the accessors below treat as
empty. flatc prints doubles in fixed notation; the JSON Python writes back
uses repr, which flatc parses exactly.
"""
import json
import os
import re
import shutil
import struct
import subprocess

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8}


class FlatcError(RuntimeError):
    pass


def flatc_path():
    path = shutil.which("flatc")
    if not path:
        raise FlatcError("flatc is not on PATH (it converts plans to JSON and back)")
    return path


def _flatc(args):
    r = subprocess.run([flatc_path()] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        raise FlatcError(f"flatc {' '.join(args)} failed ({r.returncode}): "
                         f"{r.stdout.strip()}")


def load(schema, plan_path, workdir):
    """The plan file at plan_path as a dict (via workdir/<stem>.json)."""
    os.makedirs(workdir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(plan_path))[0]
    _flatc(["--json", "--strict-json", "--raw-binary", "--defaults-json",
            "-o", workdir, schema, "--", plan_path])
    with open(os.path.join(workdir, stem + ".json")) as f:
        return json.load(f)


UNSEALED = (1 << 64) - 1  # runtime/plan/PlanChecksum.h: kUnsealedChecksum


def save(schema, plan, plan_path, workdir, seal_checksum=True):
    """Writes plan (a dict) as the binary plan file plan_path, with its
    checksum recomputed (seal_checksum=False keeps the dict's value)."""
    os.makedirs(workdir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(plan_path))[0]
    json_path = os.path.join(workdir, stem + ".json")
    if seal_checksum:
        plan = dict(plan, checksum=UNSEALED)
    with open(json_path, "w") as f:
        json.dump(plan, f, indent=1)
    _flatc(["--binary", "-o", workdir, schema, json_path])
    made = os.path.join(workdir, stem + ".dsplan")
    if seal_checksum:
        seal(schema, made)
    if os.path.abspath(made) != os.path.abspath(plan_path):
        shutil.move(made, plan_path)


def _plan_field_index(schema, field):
    """The position of `field` among table Plan's fields in plan.fbs."""
    text = open(schema).read()
    body = re.search(r"^table Plan \{(.*?)^\}", text, re.S | re.M).group(1)
    names = re.findall(r"^\s*(\w+)\s*:", body, re.M)
    return names.index(field)


def seal(schema, path):
    """Writes Plan.checksum of the plan file at path: FNV-1a 64 over the file
    with the field's 8 bytes read as zeros (as dsc does)."""
    data = bytearray(open(path, "rb").read())
    root = struct.unpack_from("<I", data, 0)[0]
    vtable = root - struct.unpack_from("<i", data, root)[0]
    vt_size = struct.unpack_from("<H", data, vtable)[0]
    slot = 4 + 2 * _plan_field_index(schema, "checksum")
    field = struct.unpack_from("<H", data, vtable + slot)[0] if slot < vt_size else 0
    if field == 0:
        raise FlatcError(f"{path}: the plan stores no checksum field")
    at = root + field
    data[at:at + 8] = bytes(8)
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    struct.pack_into("<Q", data, at, h)
    with open(path, "wb") as f:
        f.write(data)


# --- lookups -------------------------------------------------------------

def vec(table, key):
    """A vector field, [] when the plan left it unset."""
    v = table.get(key)
    return v if v is not None else []


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def buffer_bytes(plan, bid):
    b = plan["buffers"][bid]
    return numel(vec(b, "shape")) * DTYPE_BYTES[b["dtype"]]


def buffer_range(plan, bid):
    """(arena, first byte, one past the last byte) of buffer bid."""
    b = plan["buffers"][bid]
    return b["arena"], b["offset"], b["offset"] + buffer_bytes(plan, bid)


def overlaps(x, y):
    return x[0] == y[0] and x[1] < y[2] and y[1] < x[2]


def contains(outer, inner):
    return outer[0] == inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2]


def arena_category(plan, bid):
    return plan["arenas"][plan["buffers"][bid]["arena"]]["category"]


def program(plan, name):
    for p in plan["programs"]:
        if p["name"] == name:
            return p
    return None


def micro_programs(plan):
    """The programs that run a micro-batch forward and backward."""
    return [p for p in plan["programs"] if p["name"].startswith("micro_step")]


def variable(plan, name):
    for v in plan["variables"]:
        if v["name"] == name:
            return v
    return None


def grad_of(plan, param):
    """The gradient accumulator variable of parameter `param`."""
    for v in plan["variables"]:
        if v["kind"] == "grad" and v["of"] == param:
            return v
    return None


def params_within(plan, bid):
    """The parameter variables whose buffers lie inside buffer bid (a flat
    view over an optimizer group)."""
    outer = buffer_range(plan, bid)
    return [v for v in plan["variables"] if v["kind"] == "param"
            and contains(outer, buffer_range(plan, v["buffer"]))]


def users(plan, bid):
    """(program name, index, "in"/"out") for every instruction that names
    buffer bid."""
    out = []
    for p in plan["programs"]:
        for i, ins in enumerate(vec(p, "instrs")):
            if bid in vec(ins, "inputs"):
                out.append((p["name"], i, "in"))
            if bid in vec(ins, "outputs"):
                out.append((p["name"], i, "out"))
    return out


def constant_of(plan, bid):
    for c in vec(plan, "constants"):
        if c["buffer"] == bid:
            return c
    return None


def describe(prog, index, ins):
    loc = ins.get("loc") or "-"
    return f"@{prog['name']}[{index}] {ins['kernel']} ({loc})"
