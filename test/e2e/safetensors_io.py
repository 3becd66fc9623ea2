"""Reads and writes safetensors files (an 8-byte little-endian header size, a
JSON header, then the raw tensors) with the standard library only: the tests
run under Debian's python3, which has no `safetensors` package.

read() returns {name: Tensor} with each tensor's dtype string, shape and
values (floats for F32/F64, ints for the integer types); it rejects a file
whose header does not describe its bytes."""
import json
import struct

_FORMATS = {"F32": ("f", 4), "F64": ("d", 8), "I32": ("i", 4), "I64": ("q", 8)}


class Tensor:
    def __init__(self, dtype, shape, values):
        self.dtype, self.shape, self.values = dtype, list(shape), values

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


class FormatError(Exception):
    pass


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise FormatError(f"{path}: {len(data)} bytes, too short for a header")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise FormatError(f"{path}: header of {n} bytes runs past the file")
    header = json.loads(data[8:8 + n])
    base, out = 8 + n, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _FORMATS:
            raise FormatError(f"{path}: {name}: unsupported dtype {dtype}")
        code, size = _FORMATS[dtype]
        lo, hi = info["data_offsets"]
        t = Tensor(dtype, info["shape"], None)
        if hi - lo != t.numel() * size or base + hi > len(data):
            raise FormatError(f"{path}: {name}: {hi - lo} bytes for {dtype} "
                              f"{t.shape}")
        t.values = struct.unpack(f"<{t.numel()}{code}", data[base + lo:base + hi])
        out[name] = t
    return out


def write(path, tensors):
    """tensors: {name: Tensor}; written in name order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        code, size = _FORMATS[t.dtype]
        blob = struct.pack(f"<{len(t.values)}{code}", *t.values)
        header[name] = {"dtype": t.dtype, "shape": t.shape,
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
