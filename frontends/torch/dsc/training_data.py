"""dsc.initialize's training_data= as a map-style dataset of micro-batch rows,
from wherever a user keeps tokens:

- a torch Dataset (or any sequence) of (tokens, targets): as it is;
- a Hugging Face `datasets.Dataset` of token ids: its `input_ids` (and
  `labels`, `attention_mask` where it has them) as torch tensors, each row
  one sequence of the compiled length, so that `engine(**batch)` runs it;
- a 1-D array of tokens (numpy, a memmap, a torch tensor): windows of the
  block size, (tokens, the next tokens), without copying the array;
- a file's path, read as dsrun --data reads it: `.bin` is nanoGPT's uint16
  tokens, `.npy` the integer array its header declares (never raw bytes),
  anything else bytes (vocabulary 256), each memory-mapped.
"""
import os

from .native import InputError

_WHAT = ("a torch Dataset of (tokens, targets), a Hugging Face datasets.Dataset of "
         "input_ids, a 1-D array of tokens or a .bin/.npy/text file")


def open_tokens(path, name="training_data"):
    """The tokens of the file at `path`, memory-mapped, as dsrun --data
    reads the file."""
    import numpy as np
    path = os.fspath(path)
    if not os.path.isfile(path):
        why = "no such file" if not os.path.exists(path) else "not a regular file"
        raise InputError(f"{name}: {path}: {why}")
    if os.path.getsize(path) == 0:
        raise InputError(f"{name}: {path}: empty")
    if path.endswith(".npy"):
        try:
            tokens = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as e:
            raise InputError(f"{name}: {path}: not a NumPy array file ({e})") from None
        kind = tokens.dtype
        if kind.kind not in "iu" or kind.byteorder == ">":
            raise InputError(f"{name}: {path}: dtype '{kind.str}' is not a token type "
                             "(little-endian integers)")
        return tokens.reshape(-1) if tokens.flags["C_CONTIGUOUS"] else tokens.ravel()
    if path.endswith(".bin"):
        if os.path.getsize(path) % 2:
            raise InputError(f"{name}: {path}: {os.path.getsize(path)} bytes, not whole "
                             "uint16 tokens (nanoGPT's .bin)")
        return np.memmap(path, dtype=np.uint16, mode="r")
    return np.memmap(path, dtype=np.uint8, mode="r")


class TokenWindows:
    """Windows of `block_size` tokens of a 1-D token array, not overlapping:
    row i is (tokens[iT : iT+T], tokens[iT+1 : iT+T+1]) as int64 tensors."""

    def __init__(self, tokens, block_size):
        self.tokens = tokens
        self.block_size = block_size

    def __len__(self):
        return max(0, (len(self.tokens) - 1) // self.block_size)

    def __getitem__(self, i):
        import numpy as np
        import torch
        if not 0 <= i < len(self):
            raise IndexError(i)
        start = i * self.block_size
        # A copy: a window of a read-only memmap would be a read-only tensor.
        window = np.array(self.tokens[start:start + self.block_size + 1], dtype=np.int64)
        window = torch.from_numpy(window)
        return window[:-1], window[1:]


def _is_hf_dataset(data):
    return type(data).__module__.split(".")[0] == "datasets" and hasattr(data, "column_names")


def _hf_rows(data, block_size):
    """A Hugging Face dataset's token columns as torch tensors, after
    checking each row has the compiled length."""
    if not hasattr(data, "with_format") or not hasattr(data, "__len__"):
        raise InputError("training_data: a streaming (iterable) Hugging Face dataset; "
                         "dsc shards a map-style one over the ranks (load it without "
                         "streaming=True)")
    columns = data.column_names
    if "input_ids" not in columns:
        raise InputError(f"training_data: the dataset has no input_ids column (it has "
                         f"{', '.join(columns)}); tokenize it first")
    kept = [c for c in ("input_ids", "labels", "attention_mask") if c in columns]
    for column in kept:
        shortest, longest = _row_lengths(data, column)
        if shortest != block_size or longest != block_size:
            length = longest if longest != block_size else shortest
            raise InputError(f"training_data: {column} has rows of {length} tokens; the step "
                             f"was compiled for {block_size} (group the texts into blocks "
                             "of that length)")
    return data.with_format("torch", columns=kept)


def _row_lengths(data, column):
    """The shortest and longest row of a list column, from its Arrow table
    without reading the rows into Python."""
    import pyarrow.compute as pc
    lengths = pc.list_value_length(data.data.column(column))
    bounds = pc.min_max(lengths).as_py()
    return bounds["min"], bounds["max"]


def as_dataset(data, block_size):
    """`data` as a map-style dataset the engine's DataLoader can shard."""
    if isinstance(data, (bytes, bytearray)):
        raise InputError("training_data: bytes; pass a file's path, or the tokens as "
                         "numpy.frombuffer(data, numpy.uint8)")
    if isinstance(data, (str, os.PathLike)):
        data = open_tokens(data)
    if _is_hf_dataset(data):
        return _hf_rows(data, block_size)
    if hasattr(data, "dtype") and hasattr(data, "shape"):  # numpy or torch
        if len(data.shape) != 1:
            raise InputError(f"training_data: an array of shape {tuple(data.shape)}; a token "
                             "array is 1-D (a Dataset gives rows of any shape)")
        if getattr(data, "is_floating_point", lambda: data.dtype.kind not in "iu")():
            raise InputError(f"training_data: an array of {data.dtype}; tokens are integers")
        windows = TokenWindows(data, block_size)
        if len(windows) == 0:
            raise InputError(f"training_data: {len(data)} tokens, fewer than one window of "
                             f"{block_size} + 1")
        return windows
    if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
        return data
    raise InputError(f"training_data: a {type(data).__name__}; dsc takes {_WHAT}")
