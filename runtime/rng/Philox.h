//===- Philox.h - Counter-based random numbers ------------------*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2,
// 3", SC'11) and the element-addressed draws built on it. Every random value
// in dsc is a pure function of (seed, stream, step, element index), so
// initialization and dropout masks do not depend on world size, sharding or
// rematerialization. Header-only, standard library only.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_RNG_PHILOX_H
#define DSC_RUNTIME_RNG_PHILOX_H

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace dsc::rng {

// The CUDA backend's kernels draw with these same functions (dropout masks
// bitwise equal on every backend), so the core is host-and-device code.
#if defined(__CUDACC__)
#define DSC_RNG_HOST_DEVICE __host__ __device__
#else
#define DSC_RNG_HOST_DEVICE
#endif

/// Philox4x32 with 10 rounds, in place: maps the 128-bit counter `ctr` and
/// the 64-bit key (k0, k1) to 128 random bits.
DSC_RNG_HOST_DEVICE inline void philoxRounds(uint32_t ctr[4], uint32_t k0,
                                             uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    // The key is bumped between rounds, so round 0 uses the key as given.
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    uint64_t p0 = uint64_t(kMul0) * ctr[0];
    uint64_t p1 = uint64_t(kMul1) * ctr[2];
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    uint32_t n0 = hi1 ^ ctr[1] ^ k0, n2 = hi0 ^ ctr[3] ^ k1;
    ctr[0] = n0;
    ctr[1] = lo1;
    ctr[2] = n2;
    ctr[3] = lo0;
  }
}

/// The four words of Philox block `block` of (seed, stream, step): the
/// words of elements 4 * block .. 4 * block + 3.
DSC_RNG_HOST_DEVICE inline void blockWords(uint64_t seed, uint32_t stream,
                                           uint32_t step, uint64_t block,
                                           uint32_t words[4]) {
  words[0] = uint32_t(block);
  words[1] = uint32_t(block >> 32);
  words[2] = stream;
  words[3] = step;
  philoxRounds(words, uint32_t(seed), uint32_t(seed >> 32));
}

/// Philox4x32 with 10 rounds over a counter and key given as arrays.
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                             std::array<uint32_t, 2> key) {
  philoxRounds(ctr.data(), key[0], key[1]);
  return ctr;
}

/// 32 random bits for element `index` of (seed, stream, step). One Philox call
/// yields four words, so four consecutive indices share a counter.
DSC_RNG_HOST_DEVICE inline uint32_t bitsAt(uint64_t seed, uint32_t stream,
                                           uint32_t step, uint64_t index) {
  uint32_t words[4];
  blockWords(seed, stream, step, index >> 2, words);
  return words[index & 3];
}

/// Uniform in [0, 1) with 24 random bits, so the value is exact in float.
inline float uniformAt(uint64_t seed, uint32_t stream, uint32_t step,
                       uint64_t index) {
  return float(bitsAt(seed, stream, step, index) >> 8) * 0x1p-24f;
}

/// The same value as uniformAt, as a double (exactly representable).
inline double uniformAt64(uint64_t seed, uint32_t stream, uint32_t step,
                          uint64_t index) {
  return double(bitsAt(seed, stream, step, index) >> 8) * 0x1p-24;
}

/// Standard normal by Box-Muller over the uniforms at 2*index and 2*index+1.
/// 1-u1 lies in (0, 1], so the logarithm is always finite.
inline double normalAt(uint64_t seed, uint32_t stream, uint32_t step,
                       uint64_t index) {
  const double kTwoPi = 6.283185307179586476925286766559;
  double u1 = uniformAt64(seed, stream, step, 2 * index);
  double u2 = uniformAt64(seed, stream, step, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(kTwoPi * u2);
}

/// The stream of a named tensor (a variable's initializer): the 32-bit FNV-1a
/// hash of its name, so a tensor's draws depend on its name only, not on the
/// order in which tensors are declared.
inline uint32_t streamForName(std::string_view name) {
  uint32_t hash = 2166136261u;
  for (char c : name) {
    hash ^= uint32_t(static_cast<unsigned char>(c));
    hash *= 16777619u;
  }
  return hash;
}

} // namespace dsc::rng

#endif // DSC_RUNTIME_RNG_PHILOX_H
