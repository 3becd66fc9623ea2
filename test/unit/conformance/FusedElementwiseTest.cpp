//===- FusedElementwiseTest.cpp - a fused group against its unfused ops ---===//
//
// ds.fused_elementwise must give bitwise what the group's ops give one
// kernel call at a time on the same backend, in f32, bf16 and f16, with
// inputs broadcast along the leading dims; and refuse a malformed program
// or operands with one line.
//
//===----------------------------------------------------------------------===//

#include "test/unit/conformance/KernelTestSupport.h"

#include "runtime/kernels/FusedProgram.h"

using namespace dsc;
using namespace dsc::conformance;
namespace fp = dsc::rt::fused;

namespace {

class FusedElementwiseKernels : public Conformance {};

/// One op of a group: the unfused kernel and its attributes, the program's
/// opcode, its operands (value numbers) and whether its result leaves the
/// group. `cast` results take the dtype `castTo`.
struct Step {
  const char *kernel;
  fp::Opcode op;
  int a, b;
  std::vector<int64_t> ints = {};
  bool output = true;
  bool cast = false;
};

fp::Rounding roundingOf(DType t) {
  fp::Rounding r = fp::Rounding::F32;
  EXPECT_TRUE(fp::roundingOf(t, r)) << rt::dtypeName(t);
  return r;
}

/// Runs `steps` over `inputs` unfused (one kernel call each) and fused
/// (one ds.fused_elementwise); compares every output bitwise.
void expectFusedEqualsUnfused(std::vector<Buf> inputs,
                              const std::vector<Step> &steps, Shape group,
                              DType dtype, DType castTo) {
  std::vector<Buf> values = std::move(inputs);
  values.reserve(values.size() + steps.size());
  const int numInputs = int(values.size());
  fp::Program program;
  program.numInputs = numInputs;
  for (const Step &s : steps) {
    DType t = s.cast ? castTo : dtype;
    Buf out = poisoned(group, t);
    std::vector<Buf *> ins{&values[s.a]};
    if (s.b >= 0)
      ins.push_back(&values[s.b]);
    RUN_OK(s.kernel, ins, {&out}, s.ints);
    program.code.push_back({s.op, s.a, s.b, roundingOf(t)});
    if (s.output)
      program.outputs.push_back(int(values.size()));
    values.push_back(std::move(out));
  }
  std::vector<Buf> fused;
  for (int v : program.outputs)
    fused.push_back(poisoned(group, values[v].dtype));
  std::vector<Buf *> ins, outs;
  for (int i = 0; i < numInputs; ++i)
    ins.push_back(&values[i]);
  for (Buf &b : fused)
    outs.push_back(&b);
  RUN_OK("ds.fused_elementwise", ins, outs, fp::encode(program));
  for (size_t o = 0; o < fused.size(); ++o) {
    const Step &s = steps[program.outputs[o] - numInputs];
    EXPECT_TRUE(bitwiseEqual(fused[o], values[program.outputs[o]]))
        << "output " << o << " (" << s.kernel << ")";
  }
}

// Value numbers: 0 x, 1 y (positive), 2 bias [C], 3 a scalar, then one per
// step in order.
const std::vector<Step> kEveryOp = {
    {"ds.add", fp::Opcode::Add, 0, 2, {}, false},  // 4
    {"ds.mul", fp::Opcode::Mul, 4, 3, {}, false},  // 5
    {"ds.sub", fp::Opcode::Sub, 5, 1},             // 6
    {"ds.div", fp::Opcode::Div, 6, 1},             // 7
    {"ds.minimum", fp::Opcode::Minimum, 7, 0},     // 8
    {"ds.maximum", fp::Opcode::Maximum, 8, 2},     // 9
    {"ds.neg", fp::Opcode::Neg, 9, -1},            // 10
    {"ds.exp", fp::Opcode::Exp, 8, -1},            // 11
    {"ds.log", fp::Opcode::Log, 1, -1},            // 12
    {"ds.tanh", fp::Opcode::Tanh, 7, -1},          // 13
    {"ds.sqrt", fp::Opcode::Sqrt, 1, -1},          // 14
    {"ds.rsqrt", fp::Opcode::Rsqrt, 1, -1},        // 15
    {"ds.relu", fp::Opcode::Relu, 6, -1},          // 16
    {"ds.silu", fp::Opcode::Silu, 6, -1},          // 17
    {"ds.gelu", fp::Opcode::GeluErf, 6, -1, {0}},  // 18
    {"ds.gelu", fp::Opcode::GeluTanh, 6, -1, {1}}, // 19
    {"ds.relu_grad", fp::Opcode::ReluGrad, 6, 13}, // 20
    {"ds.silu_grad", fp::Opcode::SiluGrad, 6, 13}, // 21
    {"ds.gelu_grad", fp::Opcode::GeluErfGrad, 6, 13, {0}},
    {"ds.gelu_grad", fp::Opcode::GeluTanhGrad, 6, 13, {1}},
    {"ds.swiglu", fp::Opcode::Swiglu, 6, 13},                // 24
    {"ds.cast", fp::Opcode::Round, 24, -1, {}, false, true}, // 25
    {"ds.cast", fp::Opcode::Round, 25, -1},                  // 26
};

std::vector<Buf> everyOpInputs(std::mt19937_64 &rng, const Shape &group,
                               DType t) {
  std::vector<Buf> in;
  in.push_back(uniform(rng, group, -3, 3, t));
  in.push_back(uniform(rng, group, 0.25, 2, t));
  in.push_back(uniform(rng, Shape{group.back()}, -1, 1, t));
  in.push_back(uniform(rng, Shape{}, 0.5, 1.5, t));
  return in;
}

TEST_P(FusedElementwiseKernels, EveryOpEqualsItsKernelBitwise) {
  SEEDED_RNG(rng);
  // 70 000 elements: several parallel chunks and a partial tile.
  for (const Shape &group : {Shape{70, 1000}, Shape{3, 5, 7}}) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      SCOPED_TRACE(shapeString(group) + " " + std::string(rt::dtypeName(t)));
      DType other = t == DType::f32 ? DType::bf16 : DType::f32;
      expectFusedEqualsUnfused(everyOpInputs(rng, group, t), kEveryOp, group, t,
                               other);
    }
  }
}

// Llama's SwiGLU backward as phase fused groups it: g * up and g * silu
// read one g; the first feeds silu_grad and is not an output.
TEST_P(FusedElementwiseKernels, SwigluBackwardEqualsItsThreeOps) {
  SEEDED_RNG(rng);
  const Shape group{8, 16, 704};
  for (DType t : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(rt::dtypeName(t));
    std::vector<Buf> in; // g, up, silu(gate), gate
    for (int i = 0; i < 4; ++i)
      in.push_back(uniform(rng, group, -2, 2, t));
    expectFusedEqualsUnfused(std::move(in),
                             {{"ds.mul", fp::Opcode::Mul, 0, 1, {}, false},
                              {"ds.mul", fp::Opcode::Mul, 0, 2},
                              {"ds.silu_grad", fp::Opcode::SiluGrad, 3, 4}},
                             group, t, t);
  }
}

// A 16-bit gradient widened and squared (the gradient norm's terms).
TEST_P(FusedElementwiseKernels, WideningCastFeedsAnF32Op) {
  SEEDED_RNG(rng);
  const Shape group{300, 257};
  std::vector<Buf> in;
  in.push_back(uniform(rng, group, -2, 2, DType::bf16));
  expectFusedEqualsUnfused(
      std::move(in),
      {{"ds.cast", fp::Opcode::Round, 0, -1, {}, false, true},
       {"ds.mul", fp::Opcode::Mul, 1, 1}},
      group, DType::f32, DType::f32);
}

/// x squared (in x's dtype, or in f32 after a widening cast with `widen`)
/// and summed over group's leading dims down to `sumShape`, unfused (the
/// kernels, one call each) and as one program whose outputs are the sum
/// and, with `keepSquares`, the squares: bitwise alike.
void expectSquareSumEqualsUnfused(std::mt19937_64 &rng, const Shape &group,
                                  const Shape &sumShape, DType t, bool widen,
                                  bool keepSquares) {
  SCOPED_TRACE(shapeString(group) + " -> " + shapeString(sumShape) + " " +
               rt::dtypeName(t) + (widen ? " widened" : ""));
  const DType sq = widen ? DType::f32 : t;
  Buf x = uniform(rng, group, -3, 3, t), wide = poisoned(group, sq);
  Buf squares = poisoned(group, sq), sum = poisoned(sumShape, sq);
  fp::Program program;
  program.numInputs = 1;
  int squared = 0;
  if (widen) {
    RUN_OK("ds.cast", {&x}, {&wide});
    program.code.push_back({fp::Opcode::Round, 0, -1, roundingOf(sq)});
    squared = 1;
  }
  Buf &base = widen ? wide : x;
  RUN_OK("ds.mul", {&base, &base}, {&squares});
  std::vector<int64_t> axes;
  for (size_t d = 0; d < group.size() - sumShape.size(); ++d)
    axes.push_back(int64_t(d));
  RUN_OK("ds.reduce_sum", {&squares}, {&sum}, axes);
  program.code.push_back({fp::Opcode::Mul, squared, squared, roundingOf(sq)});
  program.code.push_back(
      {fp::Opcode::ReduceSum, squared + 1, -1, roundingOf(sq)});
  Buf fusedSum = poisoned(sumShape, sq), fusedSquares = poisoned(group, sq);
  std::vector<Buf *> outs{&fusedSum};
  program.outputs = {squared + 2};
  if (keepSquares) {
    outs.push_back(&fusedSquares);
    program.outputs.push_back(squared + 1);
  }
  RUN_OK("ds.fused_elementwise", {&x}, outs, fp::encode(program));
  EXPECT_TRUE(bitwiseEqual(fusedSum, sum));
  if (keepSquares)
    EXPECT_TRUE(bitwiseEqual(fusedSquares, squares));
}

// The gradient norm's terms (phase fused's whole sums): across many sum
// blocks with a ragged last one, a 16-bit gradient widened first; and sums
// over some leading dims (a bias gradient's column sums), a single row.
TEST_P(FusedElementwiseKernels, SumsEqualReduceSumBitwise) {
  SEEDED_RNG(rng);
  for (DType t : {DType::f32, DType::bf16}) {
    expectSquareSumEqualsUnfused(rng, {300, 257}, {}, t, false, false);
    expectSquareSumEqualsUnfused(rng, {100003, 1}, {1}, t, false, true);
    expectSquareSumEqualsUnfused(rng, {5}, {}, t, false, true);
    expectSquareSumEqualsUnfused(rng, {37, 300}, {300}, t, false, true);
    expectSquareSumEqualsUnfused(rng, {4, 3, 1100}, {3, 1100}, t, false, true);
    expectSquareSumEqualsUnfused(rng, {1, 5}, {5}, t, false, false);
  }
  expectSquareSumEqualsUnfused(rng, {768, 256}, {}, DType::bf16, true, false);
  expectSquareSumEqualsUnfused(rng, {64, 33}, {33}, DType::f16, true, true);
}

// 2^60 + 1 - 2^60 is 0 in double and 1 - 2^60 + 2^60 is 1: terms placed so
// that another order of the additions (within a lane, across the eight
// lanes, across blocks of 32768, down a column) changes the sum, which the
// group's sum must add in reduce_sum's order, read straight from an input.
TEST_P(FusedElementwiseKernels, SumsAddInReduceSumsOrder) {
  constexpr double kBig = 0x1p60;
  struct Case {
    Shape group;
    std::vector<std::pair<int64_t, double>> terms; // (element, value)
  };
  const std::vector<Case> cases = {
      // Lanes 0-3 of one block: ((a0 + a1) + (a2 + a3)) against in turn.
      {{100, 1}, {{0, kBig}, {1, 1}, {2, -kBig}, {3, 1}}},
      // One lane, in element order.
      {{100, 1}, {{8, 1}, {16, kBig}, {24, -kBig}}},
      // Blocks 1-3 of 32768 elements (and a ragged fourth).
      {{100003, 1}, {{32768, 1}, {65536, kBig}, {98304, -kBig}}},
      // Down a column of a column sum.
      {{5, 7}, {{3, 1}, {10, kBig}, {17, -kBig}, {6, -kBig}, {13, kBig}}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeString(c.group));
    Buf x = filled(c.group, 0.0);
    for (auto [at, v] : c.terms)
      x.set(at, v);
    const Shape sumShape{c.group.back()};
    Buf sum = poisoned(sumShape), fused = poisoned(sumShape);
    RUN_OK("ds.reduce_sum", {&x}, {&sum}, {0});
    RUN_OK("ds.fused_elementwise", {&x}, {&fused},
           {1, int64_t(fp::Opcode::ReduceSum), 0, -1, 0, 1});
    EXPECT_TRUE(bitwiseEqual(fused, sum));
  }
}

TEST_P(FusedElementwiseKernels, MalformedProgramsAndOperandsAreRefused) {
  Buf x = filled({4, 6}, 1.0), bias = filled({6}, 1.0), wrong = filled({4}, 1);
  Buf out = poisoned({4, 6});
  auto add = [](int64_t a, int64_t b) {
    return std::vector<int64_t>{1, int64_t(fp::Opcode::Add), a, b, 0, 2};
  };
  EXPECT_RUN_ERROR(run("ds.fused_elementwise", {&x, &bias}, {&out}, add(0, 1)),
                   "");
  EXPECT_RUN_ERROR(
      run("ds.fused_elementwise", {&x, &bias}, {&out}, {1, 99, 0, 1, 0, 2}),
      "ds.fused_elementwise: program instruction 0 has unknown opcode 99");
  EXPECT_RUN_ERROR(run("ds.fused_elementwise", {&x, &bias}, {&out}, add(0, 2)),
                   "ds.fused_elementwise: program instruction 0 reads an "
                   "operand that is not an earlier value");
  EXPECT_RUN_ERROR(run("ds.fused_elementwise", {&x, &bias}, {&out},
                       {1, int64_t(fp::Opcode::Add), 0, 1, 0, 0}),
                   "ds.fused_elementwise: program output 0 is not an "
                   "instruction's result");
  EXPECT_RUN_ERROR(run("ds.fused_elementwise", {&x, &bias}, {&out},
                       {1, int64_t(fp::Opcode::Add), 0, 1, 0}),
                   "ds.fused_elementwise: program has 5 ints, expected 6 for "
                   "1 instructions and 1 outputs");
  EXPECT_RUN_ERROR(
      run("ds.fused_elementwise", {&x, &wrong}, {&out}, add(0, 1)),
      "ds.fused_elementwise: input 1 of shape [4] must be an f32, f16 or bf16 "
      "tensor of the outputs' shape [4, 6] or its trailing dims");
  Buf other = poisoned({6, 4});
  EXPECT_RUN_ERROR(
      run("ds.fused_elementwise", {&x, &bias}, {&out, &other},
          {1, int64_t(fp::Opcode::Add), 0, 1, 0, 2, 2}),
      "ds.fused_elementwise: outputs must be f32, f16 or bf16 tensors of one "
      "shape (a sum's: its trailing dims), got [4, 6] and [6, 4]");
  // A sum: only an output reads it, one a program, its output the group's
  // trailing dims.
  const int64_t sum = int64_t(fp::Opcode::ReduceSum);
  const int64_t neg = int64_t(fp::Opcode::Neg);
  EXPECT_RUN_ERROR(run("ds.fused_elementwise", {&x, &bias}, {&out},
                       {3, 0, 0, 1, 0, sum, 2, -1, 0, neg, 3, -1, 0, 4}),
                   "ds.fused_elementwise: program instruction 2 reads a "
                   "ReduceSum's result (only an output may)");
  Buf scalar = poisoned({}), column = poisoned({6});
  EXPECT_RUN_ERROR(run("ds.fused_elementwise", {&x, &bias}, {&scalar, &column},
                       {3, 0, 0, 1, 0, sum, 2, -1, 0, sum, 2, -1, 0, 3, 4}),
                   "ds.fused_elementwise: program instruction 2 is a second "
                   "ReduceSum (at most one)");
  EXPECT_RUN_ERROR(run("ds.fused_elementwise", {&x, &bias}, {&out},
                       {2, 0, 0, 1, 0, sum, 2, -1, 0, 2}),
                   "ds.fused_elementwise: program instruction 1 is a "
                   "ReduceSum no output stores");
  EXPECT_RUN_ERROR(run("ds.fused_elementwise", {&x, &bias}, {&out, &wrong},
                       {2, 0, 0, 1, 0, sum, 2, -1, 0, 2, 3}),
                   "ds.fused_elementwise: outputs must be f32, f16 or bf16 "
                   "tensors of one shape (a sum's: its trailing dims), got "
                   "[4, 6] and [4]");
}

INSTANTIATE_TEST_SUITE_P(Backends, FusedElementwiseKernels,
                         testing::ValuesIn(rt::backendNames()), backendName);

} // namespace
