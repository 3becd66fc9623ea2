"""Textual `ds` MLIR: element types, tensor types, symbol names and dense
constants, as the ds dialect's parser reads them (dialects/ds/DsOps.td)."""
import re

import torch

# torch dtype -> MLIR element type. Integer tensors become i32: dsrun feeds
# token ids as i32 and every index the graph needs fits.
ELEMENT_TYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int64: "i32",
    torch.int32: "i32",
    torch.bool: "i1",
}

FLOAT_TYPES = ("f32", "f16", "bf16", "f64")


def element_type(dtype):
    if dtype not in ELEMENT_TYPES:
        raise KeyError(dtype)
    return ELEMENT_TYPES[dtype]


def tensor_type(shape, elt):
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{elt}>"


_BARE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")


def symbol(name):
    """@name, quoted where MLIR's bare-identifier syntax does not cover it."""
    if _BARE_SYMBOL.match(name):
        return "@" + name
    escaped = name.replace("\\", "\\5C").replace('"', "\\22")
    return '@"' + escaped + '"'


def float_literal(value):
    """A float attribute MLIR parses back to the same double."""
    value = float(value)
    if value != value:
        return "0x7FF8000000000000"
    if value in (float("inf"), float("-inf")):
        return "0x7FF0000000000000" if value > 0 else "0xFFF0000000000000"
    mantissa, _, exponent = repr(value).partition("e")
    if "." not in mantissa:
        mantissa += ".0"  # MLIR reads "1e-05" as an integer literal
    return mantissa + ("e" + exponent if exponent else "")


def _storage_dtype(elt):
    return {"f32": torch.float32, "f16": torch.float16,
            "bf16": torch.bfloat16, "f64": torch.float64,
            "i32": torch.int32, "i1": torch.bool}[elt]


def dense(tensor, elt):
    """`dense<...> : tensor<...>` for `tensor` stored as `elt`: a splat when
    every element is equal, else the raw little-endian bytes in hex."""
    t = tensor.detach().to("cpu").to(_storage_dtype(elt)).contiguous()
    ty = tensor_type(tuple(t.shape), elt)
    flat = t.reshape(-1)
    if flat.numel() > 0 and bool((flat == flat[0]).all()):
        v = flat[0].item()
        if elt == "i1":
            lit = "true" if v else "false"
        elif elt == "i32":
            lit = str(int(v))
        else:
            lit = float_literal(v)
        return f"dense<{lit}> : {ty}"
    if elt == "i1":
        # MLIR packs i1 one per byte in hex form.
        raw = flat.to(torch.uint8).numpy().tobytes()
    elif elt == "bf16":
        raw = flat.view(torch.int16).numpy().tobytes()
    else:
        raw = flat.numpy().tobytes()
    return f'dense<"0x{raw.hex().upper()}"> : {ty}'
