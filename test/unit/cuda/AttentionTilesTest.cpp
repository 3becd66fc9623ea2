//===- AttentionTilesTest.cpp - the CUDA attention programs, on the host --===//
//
// The CUDA backend's attention is a set of tiled block programs
// (runtime/backends/cuda/AttentionTiles.h) that run unchanged on the host
// through emulateTiles. These cases run them here, without a GPU, against
// the float64 reference: every tile size the backend uses for a head dim,
// tails in both directions, causal masks with Tq != Tk, rows that see no
// key. Each program also runs with the threads of every phase in the
// opposite order and must give the same bits: a phase that reads what
// another thread of the same phase writes would not.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/AttentionTiles.h"
#include "runtime/backends/cuda/AttentionMmaGradTiles.h"
#include "runtime/backends/cuda/AttentionMmaTiles.h"
#include "runtime/core/Half.h"
#include "test/unit/conformance/KernelTestSupport.h"

using namespace dsc;
using namespace dsc::conformance;
namespace tiles = dsc::rt::cuda::tiles;

namespace {

/// Global memory by storage code (cuda::Storage: 0 f32, 1 f16, 2 bf16).
struct HostIO {
  static float load(const void *p, int s, int64_t i) {
    const uint16_t h = load16(p, s == 0 ? 0 : i);
    return s == 0   ? static_cast<const float *>(p)[i]
           : s == 1 ? f16ToFloat(h)
                    : bf16ToFloat(h);
  }
  static void store(void *p, int s, int64_t i, float v) {
    if (s == 0)
      static_cast<float *>(p)[i] = v;
    else
      static_cast<uint16_t *>(p)[i] = s == 1 ? floatToF16(v) : floatToBf16(v);
  }
  static uint16_t load16(const void *p, int64_t i) {
    return static_cast<const uint16_t *>(p)[i];
  }
};

struct Case {
  int64_t B, H, Tq, Tk, D, Dv;
};
const Case kCases[] = {
    // the conformance suite's shapes
    {2, 3, 5, 5, 7, 7},
    {1, 2, 13, 13, 8, 5},
    {2, 3, 5, 13, 7, 5},
    {1, 1, 7, 3, 4, 4},
    {2, 4, 33, 33, 16, 16},
    {1, 1, 1, 1, 1, 1},
    {1, 2, 150, 150, 5, 3},
    {1, 1, 100, 131, 4, 6},
    {1, 1, 131, 70, 3, 4},
    {1, 1, 0, 5, 3, 4},
    {1, 1, 4, 0, 3, 4},
    {1, 1, 4, 4, 0, 4}, // head dims of 0: the tile loads walk nothing
    {1, 1, 4, 4, 3, 0},
    // several tiles of each size; head dims at and past the tile widths.
    // (Not cases where nearly every row sees no key: the tolerance is
    // relative to the mean magnitude, which those rows make meaningless.)
    {2, 1, 129, 129, 64, 64},
    {1, 1, 65, 61, 64, 65},
    {1, 2, 70, 100, 100, 30},
    {1, 1, 40, 37, 130, 200},
    {1, 1, 70, 20, 8, 8},
};

/// q, k, v and g of one case, all of one dtype (f32, f16 or bf16), each
/// [B, H, T, D] or, seqMajor, [B, T, H, D].
struct Inputs {
  Buf q, k, v, g;
  double scale;
  bool seqMajor = false;
  tiles::Problem problem(bool causal) {
    tiles::Problem a;
    a.q = q.words.data();
    a.k = k.words.data();
    a.v = v.words.data();
    a.g = g.words.data();
    a.sq = a.sk = a.sv = a.sg = q.dtype == DType::f32   ? 0
                                : q.dtype == DType::f16 ? 1
                                                        : 2;
    const int h = seqMajor ? 2 : 1, t = seqMajor ? 1 : 2;
    a.pairs = q.shape[0] * q.shape[h];
    a.heads = q.shape[h];
    a.seqMajor = seqMajor;
    a.Tq = q.shape[t];
    a.Tk = k.shape[t];
    a.D = q.shape[3];
    a.Dv = v.shape[3];
    a.causal = causal;
    a.scale = float(scale);
    return a;
  }
};

/// The same operands laid out [B, T, H, D].
Inputs seqMajorOf(const Inputs &in) {
  Inputs s{swapDims12(in.q), swapDims12(in.k), swapDims12(in.v),
           swapDims12(in.g), in.scale};
  s.seqMajor = true;
  return s;
}

Inputs inputsFor(std::mt19937_64 &rng, const Case &c, DType t = DType::f32) {
  Inputs in{uniform(rng, {c.B, c.H, c.Tq, c.D}, -2, 2, t),
            uniform(rng, {c.B, c.H, c.Tk, c.D}, -2, 2, t),
            uniform(rng, {c.B, c.H, c.Tk, c.Dv}, -2, 2, t),
            uniform(rng, {c.B, c.H, c.Tq, c.Dv}, -2, 2, t),
            c.D > 0 ? 1.0 / std::sqrt(double(c.D)) : 1.0};
  return in;
}

template <class Cfg>
Buf forward(Inputs &in, bool causal, tiles::ThreadOrder order) {
  Buf out =
      poisoned({in.q.shape[0], in.q.shape[1], in.q.shape[2], in.v.shape[3]});
  tiles::ForwardTiles<Cfg, HostIO, false> prog;
  prog.a = in.problem(causal);
  prog.out = out.f32();
  tiles::emulateTiles(prog, order);
  return out;
}

struct Grads {
  Buf dq, dk, dv;
};

template <class Cfg>
Grads backward(Inputs &in, bool causal, tiles::ThreadOrder order) {
  Grads out{poisoned(in.q.shape), poisoned(in.k.shape), poisoned(in.v.shape)};
  const tiles::Problem a = in.problem(causal);
  const size_t rows = size_t(a.pairs * a.Tq);
  std::vector<float> lse(rows, NAN), dsum(rows, NAN);
  tiles::ForwardTiles<Cfg, HostIO, true> stats;
  stats.a = a;
  stats.lse = lse.data();
  stats.dsum = dsum.data();
  tiles::emulateTiles(stats, order);
  tiles::GradKVTiles<Cfg, HostIO> kv;
  kv.a = a;
  kv.lse = lse.data();
  kv.dsum = dsum.data();
  kv.dk = out.dk.f32();
  kv.dv = out.dv.f32();
  tiles::emulateTiles(kv, order);
  tiles::GradQTiles<Cfg, HostIO> q;
  q.a = a;
  q.lse = lse.data();
  q.dsum = dsum.data();
  q.dq = out.dq.f32();
  tiles::emulateTiles(q, order);
  if (a.Tq == 0) { // the backend zeroes dk and dv without running a program
    out.dk = filled(in.k.shape, 0);
    out.dv = filled(in.v.shape, 0);
  }
  return out;
}

::testing::AssertionResult sameBits(const Buf &a, const Buf &b) {
  if (a.words == b.words)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the thread orders disagree";
}

/// Every case through tile sizes Cfg, when they hold its head dims.
template <class Cfg> void checkTiles(const char *name) {
  SEEDED_RNG(rng);
  int ran = 0;
  for (const Case &c : kCases) {
    if (std::max(c.D, c.Dv) > Cfg::DM)
      continue;
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(name) + ": B H Tq Tk D Dv " +
                   shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                   (causal ? " causal" : ""));
      Inputs in = inputsFor(rng, c);
      Buf out = forward<Cfg>(in, causal, tiles::ThreadOrder::Ascending);
      REF_OK(want, ref::attention(in.q.toRef(), in.k.toRef(), in.v.toRef(),
                                  causal, in.scale));
      EXPECT_TRUE(close(out, want));
      EXPECT_TRUE(sameBits(
          out, forward<Cfg>(in, causal, tiles::ThreadOrder::Descending)));

      Grads got = backward<Cfg>(in, causal, tiles::ThreadOrder::Ascending);
      REF_OK(grad, ref::attention_grad(in.q.toRef(), in.k.toRef(), in.v.toRef(),
                                       in.g.toRef(), causal, in.scale));
      EXPECT_TRUE(close(got.dq, grad.dq, 1e-4));
      EXPECT_TRUE(close(got.dk, grad.dk, 1e-4));
      EXPECT_TRUE(close(got.dv, grad.dv, 1e-4));
      Grads again = backward<Cfg>(in, causal, tiles::ThreadOrder::Descending);
      EXPECT_TRUE(sameBits(got.dq, again.dq));
      EXPECT_TRUE(sameBits(got.dk, again.dk));
      EXPECT_TRUE(sameBits(got.dv, again.dv));
      ++ran;
    }
  }
  EXPECT_GE(ran, 8) << "too few cases reach these tile sizes";
}

TEST(AttentionTiles, Width64MatchesReference) {
  checkTiles<tiles::Tiles64>("64");
}
TEST(AttentionTiles, Width128MatchesReference) {
  checkTiles<tiles::Tiles128>("128");
}
TEST(AttentionTiles, Width256MatchesReference) {
  checkTiles<tiles::Tiles256>("256");
}

TEST(AttentionTiles, WidthsCoverTheHeadDims) {
  EXPECT_EQ(tiles::tileWidth(1), 64);
  EXPECT_EQ(tiles::tileWidth(64), 64);
  EXPECT_EQ(tiles::tileWidth(65), 128);
  EXPECT_EQ(tiles::tileWidth(128), 128);
  EXPECT_EQ(tiles::tileWidth(129), 256);
  EXPECT_EQ(tiles::tileWidth(256), 256);
  EXPECT_EQ(tiles::tileWidth(257), 0);
}

/// The tensor-core forward: q, k, v all bf16 (or f16), output f32, against
/// the float64 reference on the same 16-bit values. P is rounded to the
/// operands' type before its product (AttentionMmaTiles.h), so the bound
/// is that rounding's: 1e-2 for bf16, 2e-3 for f16.
template <class Cfg, bool kBF16>
Buf mmaForward(Inputs &in, bool causal, tiles::ThreadOrder order) {
  Buf out =
      poisoned({in.q.shape[0], in.q.shape[1], in.q.shape[2], in.v.shape[3]});
  tiles::ForwardMmaTiles<Cfg, HostIO, kBF16> prog;
  prog.a = in.problem(causal);
  prog.out = out.f32();
  tiles::emulateTiles(prog, order);
  return out;
}

template <class Cfg, bool kBF16>
Grads mmaBackward(Inputs &in, bool causal, tiles::ThreadOrder order) {
  const tiles::Problem a = in.problem(causal);
  Grads out{poisoned(in.q.shape), poisoned(in.k.shape), poisoned(in.v.shape)};
  const size_t rows = size_t(a.pairs * a.Tq);
  std::vector<float> lse(rows, NAN), dsum(rows, NAN);
  tiles::ForwardMmaTiles<Cfg, HostIO, kBF16, true> stats;
  stats.a = a;
  stats.lse = lse.data();
  stats.dsum = dsum.data();
  tiles::emulateTiles(stats, order);
  tiles::GradKVMmaTiles<Cfg::DM, HostIO, kBF16> kv;
  kv.a = a;
  kv.lse = lse.data();
  kv.dsum = dsum.data();
  kv.dk = out.dk.f32();
  kv.dv = out.dv.f32();
  tiles::emulateTiles(kv, order);
  tiles::GradQMmaTiles<Cfg, HostIO, kBF16> dq;
  dq.a = a;
  dq.lse = lse.data();
  dq.dsum = dsum.data();
  dq.dq = out.dq.f32();
  tiles::emulateTiles(dq, order);
  return out;
}

template <class Cfg, bool kBF16> void checkMmaTiles(const char *name) {
  SEEDED_RNG(rng);
  tiles::layoutFaults() = 0;
  int ran = 0;
  for (const Case &c : kCases) {
    if (std::max(c.D, c.Dv) > Cfg::DM || c.Tq == 0)
      continue;
    // The third variant sharpens the softmax (scores in the hundreds):
    // e^score overflows f32 unless each row's max is subtracted first.
    for (int variant : {0, 1, 2}) {
      const bool causal = variant > 0, sharp = variant == 2;
      if (sharp && c.D < 16)
        continue;
      SCOPED_TRACE(std::string(name) + ": B H Tq Tk D Dv " +
                   shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                   (causal ? " causal" : "") + (sharp ? " sharp" : ""));
      Inputs in = inputsFor(rng, c, kBF16 ? DType::bf16 : DType::f16);
      in.scale *= sharp ? 40 : 1;
      auto forward = [&](tiles::ThreadOrder order) {
        return mmaForward<Cfg, kBF16>(in, causal, order);
      };
      Buf out = forward(tiles::ThreadOrder::Ascending);
      REF_OK(want, ref::attention(in.q.toRef(), in.k.toRef(), in.v.toRef(),
                                  causal, in.scale));
      // Rounding each weight (relative u) moves a weighted mean of v by at
      // most 2 u max |v|, whatever the output's own size: that is the
      // absolute part. max |v| = 2.
      const double unit = kBF16 ? 0x1p-8 : 0x1p-11;
      EXPECT_TRUE(close(out, want, kBF16 ? 1e-2 : 2e-3, 2 * unit * 2));
      EXPECT_TRUE(sameBits(out, forward(tiles::ThreadOrder::Descending)));
      ++ran;
    }
  }
  EXPECT_EQ(tiles::layoutFaults(), 0)
      << "operand elements the gather placed other than once";
  EXPECT_GE(ran, 8) << "too few cases reach these tile sizes";
}

TEST(AttentionTiles, TensorCoreForward64MatchesReference) {
  checkMmaTiles<tiles::MmaTiles64, true>("mma 64 bf16");
  checkMmaTiles<tiles::MmaTiles64, false>("mma 64 f16");
}
TEST(AttentionTiles, TensorCoreForward128MatchesReference) {
  checkMmaTiles<tiles::MmaTiles128, true>("mma 128 bf16");
  checkMmaTiles<tiles::MmaTiles128, false>("mma 128 f16");
}

/// The absolute sums of the terms each gradient element adds up, in
/// float64: dq_id sums scale dS_ij k_jd over j, dk_jd sums scale dS_ij q_id
/// over i, dv_jd sums P_ij g_id over i. Rounding P and dS to 16 bits
/// (relative u each) moves an element by up to about u times its terms'
/// absolute sum, however far the terms cancel: a small dq can carry an
/// error many times its own size and still be right.
struct TermSizes {
  std::vector<double> dq, dk, dv;
};

TermSizes termSizes(const Inputs &in, bool causal) {
  const int64_t pairs = in.q.shape[0] * in.q.shape[1], Tq = in.q.shape[2],
                Tk = in.k.shape[2], D = in.q.shape[3], Dv = in.v.shape[3];
  TermSizes t{std::vector<double>(size_t(pairs * Tq * D)),
              std::vector<double>(size_t(pairs * Tk * D)),
              std::vector<double>(size_t(pairs * Tk * Dv))};
  std::vector<double> p(static_cast<size_t>(Tk)), dp(static_cast<size_t>(Tk));
  for (int64_t b = 0; b < pairs; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t qi = (b * Tq + i) * D, gi = (b * Tq + i) * Dv;
      const int64_t seen =
          causal ? std::min(Tk, std::max<int64_t>(0, i + Tk - Tq + 1)) : Tk;
      double mx = -INFINITY, sum = 0, dsum = 0;
      for (int64_t j = 0; j < seen; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d)
          s += in.q.get(qi + d) * in.k.get((b * Tk + j) * D + d);
        p[size_t(j)] = s * in.scale;
        mx = std::max(mx, p[size_t(j)]);
      }
      for (int64_t j = 0; j < seen; ++j)
        sum += p[size_t(j)] = std::exp(p[size_t(j)] - mx);
      for (int64_t j = 0; j < seen; ++j) {
        p[size_t(j)] /= sum;
        dp[size_t(j)] = 0;
        for (int64_t d = 0; d < Dv; ++d)
          dp[size_t(j)] += in.g.get(gi + d) * in.v.get((b * Tk + j) * Dv + d);
        dsum += p[size_t(j)] * dp[size_t(j)];
      }
      for (int64_t j = 0; j < seen; ++j) {
        const double ds =
            std::fabs(p[size_t(j)] * (dp[size_t(j)] - dsum)) * in.scale;
        for (int64_t d = 0; d < D; ++d) {
          t.dq[size_t(qi + d)] +=
              ds * std::fabs(in.k.get((b * Tk + j) * D + d));
          t.dk[size_t((b * Tk + j) * D + d)] +=
              ds * std::fabs(in.q.get(qi + d));
        }
        for (int64_t d = 0; d < Dv; ++d)
          t.dv[size_t((b * Tk + j) * Dv + d)] +=
              p[size_t(j)] * std::fabs(in.g.get(gi + d));
      }
    }
  return t;
}

/// close(got, want, rtol), each element allowed `perTerm` times its terms'
/// absolute sum more.
::testing::AssertionResult closeGivenTerms(const Buf &got,
                                           const ref::Tensor &want, double rtol,
                                           const std::vector<double> &terms,
                                           double perTerm) {
  double meanAbs = 0;
  for (double w : want.data)
    meanAbs += std::fabs(w) / double(want.data.size());
  int bad = 0;
  std::ostringstream os;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get(i), w = want.data[size_t(i)];
    if (!(std::fabs(g - w) <= rtol * (std::fabs(w) + meanAbs) +
                                  perTerm * terms[size_t(i)] + 1e-30) &&
        bad++ < 5)
      os << " [" << i << "] got " << g << " want " << w << " terms "
         << terms[size_t(i)] << ";";
  }
  if (bad)
    return ::testing::AssertionFailure()
           << bad << " of " << got.numel() << " elements differ:" << os.str();
  return ::testing::AssertionSuccess();
}

/// The tensor-core gradient: statistics, dK and dV, dQ, all 16-bit in, f32
/// out, against the float64 reference on the same 16-bit values. P and dS
/// are rounded to the operands' type before their products.
template <class Cfg, bool kBF16> void checkMmaGradTiles(const char *name) {
  SEEDED_RNG(rng);
  tiles::layoutFaults() = 0;
  int ran = 0;
  for (const Case &c : kCases) {
    if (std::max(c.D, c.Dv) > Cfg::DM || c.Tq == 0)
      continue;
    // The third variant sharpens the softmax (scores in the hundreds):
    // e^score overflows f32 unless each row's max is subtracted first.
    for (int variant : {0, 1, 2}) {
      const bool causal = variant > 0, sharp = variant == 2;
      if (sharp && c.D < 16)
        continue;
      SCOPED_TRACE(std::string(name) + ": B H Tq Tk D Dv " +
                   shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                   (causal ? " causal" : "") + (sharp ? " sharp" : ""));
      Inputs in = inputsFor(rng, c, kBF16 ? DType::bf16 : DType::f16);
      in.scale *= sharp ? 40 : 1;
      auto backward = [&](tiles::ThreadOrder order) {
        return mmaBackward<Cfg, kBF16>(in, causal, order);
      };
      Grads got = backward(tiles::ThreadOrder::Ascending);
      REF_OK(want, ref::attention_grad(in.q.toRef(), in.k.toRef(), in.v.toRef(),
                                       in.g.toRef(), causal, in.scale));
      // Rounding P and dS: over 10 seeds the worst element was 0.029 (bf16)
      // and 0.0045 (f16) of |want| + mean |want|, except where an element's
      // terms cancel (1 seed in ~120: dq 0.0072 for 0.0040, its terms'
      // absolute sum 1.47): hence 2 u of that sum on top. An indexing
      // error is of the order of the terms themselves.
      const double bound = kBF16 ? 5e-2 : 1e-2;
      const double perTerm = 2 * (kBF16 ? 0x1p-8 : 0x1p-11);
      const TermSizes terms = termSizes(in, causal);
      EXPECT_TRUE(closeGivenTerms(got.dq, want.dq, bound, terms.dq, perTerm));
      EXPECT_TRUE(closeGivenTerms(got.dk, want.dk, bound, terms.dk, perTerm));
      EXPECT_TRUE(closeGivenTerms(got.dv, want.dv, bound, terms.dv, perTerm));
      Grads again = backward(tiles::ThreadOrder::Descending);
      EXPECT_TRUE(sameBits(got.dq, again.dq));
      EXPECT_TRUE(sameBits(got.dk, again.dk));
      EXPECT_TRUE(sameBits(got.dv, again.dv));
      ++ran;
    }
  }
  EXPECT_EQ(tiles::layoutFaults(), 0)
      << "operand elements the gather placed other than once";
  EXPECT_GE(ran, 8) << "too few cases reach these tile sizes";
}

TEST(AttentionTiles, TensorCoreGrad64MatchesReference) {
  checkMmaGradTiles<tiles::MmaTiles64, true>("mma grad 64 bf16");
  checkMmaGradTiles<tiles::MmaTiles64, false>("mma grad 64 f16");
}
TEST(AttentionTiles, TensorCoreGrad128MatchesReference) {
  checkMmaGradTiles<tiles::MmaTiles128, true>("mma grad 128 bf16");
  checkMmaGradTiles<tiles::MmaTiles128, false>("mma grad 128 f16");
}

TEST(AttentionTiles, MmaWidthsCoverTheHeadDims) {
  EXPECT_EQ(tiles::mmaTileWidth(1), 64);
  EXPECT_EQ(tiles::mmaTileWidth(64), 64);
  EXPECT_EQ(tiles::mmaTileWidth(65), 128);
  EXPECT_EQ(tiles::mmaTileWidth(128), 128);
  EXPECT_EQ(tiles::mmaTileWidth(129), 0);
}

/// A program with a race: in one phase each thread reads the slot its
/// neighbour writes. The two thread orders must tell it apart, or the
/// order check above could not fail.
/// Every program on seq_major operands ([B, T, H, D]: a pair's rows H * D
/// apart) against the same operands as [B, H, T, D]: the same bits, since
/// only the addresses differ.
template <class Cfg, bool kBF16> void checkSeqMajor(const char *name) {
  SEEDED_RNG(rng);
  int ran = 0;
  for (const Case &c : kCases) {
    if (std::max(c.D, c.Dv) > Cfg::DM || c.Tq == 0 || c.H == 1)
      continue;
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(name) + ": B H Tq Tk D Dv " +
                   shapeString({c.B, c.H, c.Tq, c.Tk, c.D, c.Dv}) +
                   (causal ? " causal" : ""));
      Inputs in = inputsFor(rng, c, kBF16 ? DType::bf16 : DType::f32);
      Inputs sm = seqMajorOf(in);
      const auto order = tiles::ThreadOrder::Ascending;
      Buf out, outSm;
      Grads g, gSm;
      if constexpr (kBF16) {
        out = mmaForward<Cfg, true>(in, causal, order);
        outSm = mmaForward<Cfg, true>(sm, causal, order);
        g = mmaBackward<Cfg, true>(in, causal, order);
        gSm = mmaBackward<Cfg, true>(sm, causal, order);
      } else {
        out = forward<Cfg>(in, causal, order);
        outSm = forward<Cfg>(sm, causal, order);
        g = backward<Cfg>(in, causal, order);
        gSm = backward<Cfg>(sm, causal, order);
      }
      EXPECT_TRUE(sameBits(out, swapDims12(outSm)));
      EXPECT_TRUE(sameBits(g.dq, swapDims12(gSm.dq)));
      EXPECT_TRUE(sameBits(g.dk, swapDims12(gSm.dk)));
      EXPECT_TRUE(sameBits(g.dv, swapDims12(gSm.dv)));
      ++ran;
    }
  }
  EXPECT_GE(ran, 6) << "too few cases with several heads";
}

TEST(AttentionTiles, SeqMajorOperandsGiveTheSameBits) {
  checkSeqMajor<tiles::Tiles64, false>("64");
  checkSeqMajor<tiles::Tiles128, false>("128");
}
TEST(AttentionTiles, SeqMajorTensorCoreOperandsGiveTheSameBits) {
  checkSeqMajor<tiles::MmaTiles64, true>("mma 64 bf16");
}

struct RacyProgram {
  static constexpr int kSmemFloats = tiles::kThreads, kPrologue = 1, kBody = 0,
                       kEpilogue = 2;
  float *out;
  struct Thread {
    float x;
  };
  int64_t tiles() const { return 1; }
  int64_t steps(int64_t) const { return 0; }
  void prologue(int, int64_t, int t, Thread &, float *sm) const {
    sm[t] = float(t);
  }
  void body(int, int64_t, int64_t, int, Thread &, float *) const {}
  void epilogue(int phase, int64_t, int t, Thread &th, float *sm) const {
    if (phase == 0) {
      th.x = sm[(t + 1) % tiles::kThreads] + 1; // the neighbour's slot...
      sm[t] = th.x;                             // ...which it writes now
    } else {
      out[t] = sm[t];
    }
  }
};

TEST(AttentionTiles, ThreadOrdersExposeARace) {
  std::vector<float> up(tiles::kThreads), down(tiles::kThreads);
  tiles::emulateTiles(RacyProgram{up.data()}, tiles::ThreadOrder::Ascending);
  tiles::emulateTiles(RacyProgram{down.data()}, tiles::ThreadOrder::Descending);
  EXPECT_NE(up, down);
}

/// A program whose warps meet only their own lanes after body phase 0,
/// where each thread writes its slot, and which then reads the slot
/// `offset` threads on: another warp's, which a block barrier would have
/// made safe. The warp-by-warp emulation must tell the orders apart for a
/// read of a later warp's slot and of an earlier one's.
struct CrossWarpProgram {
  static constexpr int kSmemFloats = tiles::kThreads, kPrologue = 1, kBody = 2,
                       kEpilogue = 1;
  static constexpr uint32_t kWarpBody = 0b01;
  float *out;
  int offset;
  struct Thread {
    float x;
  };
  int64_t tiles() const { return 1; }
  int64_t steps(int64_t) const { return 1; }
  void prologue(int, int64_t, int t, Thread &, float *sm) const { sm[t] = 0; }
  void body(int phase, int64_t, int64_t, int t, Thread &th, float *sm) const {
    if (phase == 0)
      sm[t] = float(t + 1);
    else
      th.x = sm[(t + offset) % tiles::kThreads];
  }
  void epilogue(int, int64_t, int t, Thread &th, float *) const {
    out[t] = th.x;
  }
};

TEST(AttentionTiles, WarpByWarpOrdersExposeACrossWarpRead) {
  for (int offset : {32, tiles::kThreads - 32}) {
    std::vector<float> up(tiles::kThreads), down(tiles::kThreads);
    tiles::emulateTiles(CrossWarpProgram{up.data(), offset},
                        tiles::ThreadOrder::Ascending);
    tiles::emulateTiles(CrossWarpProgram{down.data(), offset},
                        tiles::ThreadOrder::Descending);
    EXPECT_NE(up, down) << "offset " << offset;
  }
  // Within a warp the same reads are safe: both orders agree.
  std::vector<float> up(tiles::kThreads), down(tiles::kThreads);
  tiles::emulateTiles(CrossWarpProgram{up.data(), 0},
                      tiles::ThreadOrder::Ascending);
  tiles::emulateTiles(CrossWarpProgram{down.data(), 0},
                      tiles::ThreadOrder::Descending);
  EXPECT_EQ(up, down);
}

} // namespace
