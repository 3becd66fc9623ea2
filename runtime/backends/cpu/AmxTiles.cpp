//===- AmxTiles.cpp - bf16 products on Intel AMX tiles --------------------===//

#include "runtime/backends/cpu/AmxTiles.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define DSC_HAVE_AMX 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dsc::rt::cpu {

#if DSC_HAVE_AMX
namespace {

// Linux's arch_prctl request for an extended state component, and the
// component of the tile data (asm/prctl.h; the kernel's xstate numbering).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtileData = 18;

/// The tile configuration every product uses: palette 1, all eight tiles
/// 16 rows of 64 bytes (0-3: C's f32 blocks, 4-5: A's rows, 6-7: B's).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t bytesPerRow[16] = {};
  uint8_t rows[16] = {};
  TileConfig() {
    for (int t = 0; t < 8; ++t) {
      bytesPerRow[t] = 64;
      rows[t] = 16;
    }
  }
};

/// A 16 R x 16 Cn block of C (R, Cn in {1, 2}) over all of K.
template <int R, int Cn>
void tileBlock(int64_t K, const uint16_t *A, int64_t lda, const uint16_t *B,
               int64_t ldb, float *C, int64_t ldc, bool accumulate) {
  const int aStride = int(lda * 2), bStride = int(ldb * 4),
            cStride = int(ldc * 4);
  float *C1 = C + 16, *C2 = C + 16 * ldc, *C3 = C2 + 16;
  if (accumulate) {
    _tile_loadd(0, C, cStride);
    if constexpr (Cn > 1)
      _tile_loadd(1, C1, cStride);
    if constexpr (R > 1)
      _tile_loadd(2, C2, cStride);
    if constexpr (R > 1 && Cn > 1)
      _tile_loadd(3, C3, cStride);
  } else {
    _tile_zero(0);
    if constexpr (Cn > 1)
      _tile_zero(1);
    if constexpr (R > 1)
      _tile_zero(2);
    if constexpr (R > 1 && Cn > 1)
      _tile_zero(3);
  }
  for (int64_t k = 0; k < K; k += 32) {
    const uint16_t *b = B + (k / 2) * ldb * 2;
    _tile_loadd(4, A + k, aStride);
    _tile_loadd(6, b, bStride);
    if constexpr (R > 1)
      _tile_loadd(5, A + 16 * lda + k, aStride);
    if constexpr (Cn > 1)
      _tile_loadd(7, b + 32, bStride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (Cn > 1)
      _tile_dpbf16ps(1, 4, 7);
    if constexpr (R > 1)
      _tile_dpbf16ps(2, 5, 6);
    if constexpr (R > 1 && Cn > 1)
      _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, C, cStride);
  if constexpr (Cn > 1)
    _tile_stored(1, C1, cStride);
  if constexpr (R > 1)
    _tile_stored(2, C2, cStride);
  if constexpr (R > 1 && Cn > 1)
    _tile_stored(3, C3, cStride);
}

/// One band of 16 R rows of C across all of N.
template <int R>
void tileBand(int64_t N, int64_t K, const uint16_t *A, int64_t lda,
              const uint16_t *B, int64_t ldb, float *C, int64_t ldc,
              bool accumulate) {
  int64_t j = 0;
  for (; j + 32 <= N; j += 32)
    tileBlock<R, 2>(K, A, lda, B + j * 2, ldb, C + j, ldc, accumulate);
  if (j < N)
    tileBlock<R, 1>(K, A, lda, B + j * 2, ldb, C + j, ldc, accumulate);
}

} // namespace

bool amxUsable() {
  static const bool usable = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") ||
        !__builtin_cpu_supports("amx-bf16"))
      return false;
    // Without the grant the first tile instruction faults.
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return usable;
}

void amxGemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
             const uint16_t *packedB, int64_t ldb, float *C, int64_t ldc,
             bool accumulate) {
  static const TileConfig config;
  _tile_loadconfig(&config);
  int64_t i = 0;
  for (; i + 32 <= M; i += 32)
    tileBand<2>(N, K, A + i * lda, lda, packedB, ldb, C + i * ldc, ldc,
                accumulate);
  if (i < M)
    tileBand<1>(N, K, A + i * lda, lda, packedB, ldb, C + i * ldc, ldc,
                accumulate);
  // Back to the init state: a thread holding tile data costs every context
  // switch 8 KB more.
  _tile_release();
}

#else

bool amxUsable() { return false; }

void amxGemm(int64_t, int64_t, int64_t, const uint16_t *, int64_t,
             const uint16_t *, int64_t, float *, int64_t, bool) {}

#endif

} // namespace dsc::rt::cpu
