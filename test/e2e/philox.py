"""dsc's dropout masks, computed independently from the contract in
DESIGN.md ("randomness is counter-based, keyed by (seed, tensor id, element
index, step)") and runtime/rng/Philox.h's statement of it: Philox4x32-10
(Salmon et al., SC'11) with counter (index / 4 as 64 bits, stream, step) and
key (seed as 64 bits); element i takes word i % 4; an element is kept when
its top 24 bits are at least ceil(rate * 2^24)."""
import math

import numpy as np

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
LO = np.uint64(0xFFFFFFFF)


def philox_bits(seed, stream, step, index):
    """32 random bits per element of `index` (a uint64 array)."""
    block = index >> np.uint64(2)
    c0, c1 = block & LO, block >> np.uint64(32)
    c2 = np.full_like(block, stream & 0xFFFFFFFF)
    c3 = np.full_like(block, step & 0xFFFFFFFF)
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & LO,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & LO)
    words = np.stack([c0, c1, c2, c3])
    return words[(index & np.uint64(3)).astype(np.int64), np.arange(index.size)]


def keep_mask(seed, stream, step, first, count, rate):
    """Which of the elements first .. first + count - 1 survive dropout."""
    index = np.arange(first, first + count, dtype=np.uint64)
    threshold = math.ceil(rate * 16777216.0)
    return (philox_bits(seed, stream, step, index) >> np.uint64(8)) >= threshold
