//===- VJPTestSupport.h - finite-difference harness for the VJP rules -*- C++
//-*-===//
//
// DESIGN.md invariant 1. For each op with a VJPOpInterface, a module
//
//   ds.variable param @in0 ... (f64)
//   func.func @forward() -> tensor<f32> {
//     loss = cast(reduce_sum(op(load @in0, ...) * C))   // C: random constant
//   }
//
// goes through the real ds-verify-input and ds-autodiff passes; the
// interpreter runs @micro_step for d(loss)/d(in_i) and compares it with
// central finite differences of @forward. The finite differences run with
// rounding off, so the final cast to the contract's f32 loss is exact and
// the whole loss is float64.
//
// Inputs are drawn fresh each run; a failure prints the seed, and
// DSC_TEST_SEED=<seed> replays it. Users: VJPTest.cpp (one case per op),
// AutodiffApplyTest.cpp (accumulation and @apply), InterpreterTest.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_COMPILER_VJPTESTSUPPORT_H
#define DSC_TEST_COMPILER_VJPTESTSUPPORT_H

#include "compiler/interpreter/Interpreter.h"
#include "dialects/ds/DsOps.h"
#include "passes/Passes.h"
#include "runtime/reference/RefKernels.h"
#include "runtime/rng/Philox.h"
#include "test/compiler/TestSupport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace dsc::vjptest {

using namespace mlir;
using namespace mlir::ds;
using dsc::Interpreter;

//===----------------------------------------------------------------------===//
// Harness
//===----------------------------------------------------------------------===//

using dsc::test::DiagnosticCapture;
using dsc::test::testSeed;

inline void loadDialects(MLIRContext &ctx) {
  ctx.loadDialect<DSDialect, func::FuncDialect>();
}

enum class Dist {
  Normal,       // N(0, 1)
  Positive,     // U[0.5, 2]: log, sqrt, rsqrt, denominators
  AwayFromZero, // +-U[0.5, 2]: no kink of relu within reach of h
  Distinct,     // spread >= 0.2 apart: a unique maximum everywhere
  Index,        // integers in [0, range), an ignore value at position 0
};
enum class Elt { F64, F32, I32 };

struct Input {
  ref::Shape shape;
  Dist dist = Dist::Normal;
  Elt elt = Elt::F64;
  int64_t range = 0;
  std::optional<int64_t> ignore;
};

inline Input param(ref::Shape shape, Dist dist = Dist::Normal) {
  return Input{std::move(shape), dist, Elt::F64, 0, std::nullopt};
}
inline Input paramF32(ref::Shape shape) {
  return Input{std::move(shape), Dist::Normal, Elt::F32, 0, std::nullopt};
}
inline Input indices(ref::Shape shape, int64_t range,
                     std::optional<int64_t> ignore = std::nullopt) {
  return Input{std::move(shape), Dist::Index, Elt::I32, range, ignore};
}

using BuildFn =
    std::function<SmallVector<Value>(OpBuilder &, Location, ValueRange)>;

struct OpCase {
  std::string name;
  std::vector<Input> inputs;
  /// Builds the op on the inputs; returns the results the loss reads.
  BuildFn build;
  /// Run @micro_step without rounding too: narrowing casts, whose rounding
  /// the finite differences could not see through.
  bool exact = false;
};

inline std::ostream &operator<<(std::ostream &os, const OpCase &c) {
  return os << c.name;
}

inline Type elementType(OpBuilder &b, Elt elt) {
  switch (elt) {
  case Elt::F64:
    return b.getF64Type();
  case Elt::F32:
    return b.getF32Type();
  case Elt::I32:
    return b.getI32Type();
  }
  return {};
}

inline RankedTensorType tensorType(ArrayRef<int64_t> shape, Type elt) {
  return RankedTensorType::get(shape, elt);
}

inline ref::Tensor draw(const Input &input, std::mt19937_64 &rng) {
  ref::Tensor t(input.shape);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  switch (input.dist) {
  case Dist::Normal:
    for (double &v : t.data)
      v = normal(rng);
    break;
  case Dist::Positive:
    for (double &v : t.data)
      v = 0.5 + 1.5 * unit(rng);
    break;
  case Dist::AwayFromZero:
    for (double &v : t.data)
      v = (unit(rng) < 0.5 ? -1 : 1) * (0.5 + 1.5 * unit(rng));
    break;
  case Dist::Distinct: {
    std::vector<double> ranks(t.data.size());
    for (size_t i = 0; i < ranks.size(); ++i)
      ranks[i] = double(i) - double(ranks.size()) / 2;
    std::shuffle(ranks.begin(), ranks.end(), rng);
    for (size_t i = 0; i < ranks.size(); ++i)
      t.data[i] = 0.3 * ranks[i] + 0.05 * unit(rng);
    break;
  }
  case Dist::Index: {
    std::uniform_int_distribution<int64_t> index(0, input.range - 1);
    for (double &v : t.data)
      v = double(index(rng));
    if (input.ignore && !t.data.empty())
      t.data[0] = double(*input.ignore);
    break;
  }
  }
  return t;
}

inline std::string paramName(size_t i) { return "in" + std::to_string(i); }

/// The module of the header comment; `values` holds the integer inputs,
/// which become constants (float inputs are variables set later).
inline OwningOpRef<ModuleOp> buildModule(MLIRContext &ctx, const OpCase &c,
                                         const std::vector<ref::Tensor> &values,
                                         std::mt19937_64 &rng) {
  OpBuilder b(&ctx);
  Location loc = NameLoc::get(b.getStringAttr(c.name));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].elt != Elt::I32)
      b.create<VariableOp>(
          loc, VariableKind::param, paramName(i), FlatSymbolRefAttr(),
          tensorType(c.inputs[i].shape, elementType(b, c.inputs[i].elt)),
          InitKind::zeros, FloatAttr());

  auto f32Scalar = tensorType({}, b.getF32Type());
  auto forward = b.create<func::FuncOp>(loc, "forward",
                                        b.getFunctionType({}, {f32Scalar}));
  b.setInsertionPointToStart(forward.addEntryBlock());
  SmallVector<Value> operands;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input &input = c.inputs[i];
    auto type = tensorType(input.shape, elementType(b, input.elt));
    if (input.elt != Elt::I32) {
      operands.push_back(b.create<LoadOp>(loc, type, paramName(i)));
      continue;
    }
    std::vector<int32_t> ints(values[i].data.begin(), values[i].data.end());
    operands.push_back(b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, ArrayRef<int32_t>(ints))));
  }

  Value total;
  for (Value result : c.build(b, loc, operands)) {
    auto type = cast<RankedTensorType>(result.getType());
    auto f64Type = tensorType(type.getShape(), b.getF64Type());
    if (type != f64Type)
      result = b.create<CastOp>(loc, f64Type, result);
    std::normal_distribution<double> normal;
    std::vector<double> cotangent(type.getNumElements());
    for (double &v : cotangent)
      v = normal(rng);
    Value weights = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(f64Type, ArrayRef<double>(cotangent)));
    Value term = b.create<MulOp>(loc, result, weights);
    if (type.getRank() > 0) {
      SmallVector<int64_t> all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      term = b.create<ReduceSumOp>(loc, term, all);
    }
    total = total ? b.create<AddOp>(loc, total, term).getResult() : term;
  }
  Value loss = b.create<CastOp>(loc, f32Scalar, total);
  b.create<func::ReturnOp>(loc, loss);
  return module;
}

/// Runs @forward and returns its loss (NaN after a reported failure).
inline double forwardLoss(Interpreter &interp) {
  std::vector<ref::Tensor> out;
  if (failed(interp.run("forward", {}, out)) || out.size() != 1) {
    ADD_FAILURE() << "@forward failed";
    return std::nan("");
  }
  return out[0].data[0];
}

/// d(loss)/d(variable[index]) by central differences with a relative step.
inline double finiteDifference(Interpreter &interp, ref::Tensor &variable,
                               size_t index, double relStep = 1e-6) {
  double x = variable.data[index];
  double h = relStep * std::max(1.0, std::abs(x));
  double xp = x + h, xm = x - h;
  variable.data[index] = xp;
  double lp = forwardLoss(interp);
  variable.data[index] = xm;
  double lm = forwardLoss(interp);
  variable.data[index] = x;
  return (lp - lm) / (xp - xm);
}

inline constexpr double kTolerance = 1e-6;

inline void checkGradients(const OpCase &c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  MLIRContext ctx;
  loadDialects(ctx);
  DiagnosticCapture diags(ctx);

  std::vector<ref::Tensor> values;
  for (const Input &input : c.inputs)
    values.push_back(draw(input, rng));
  OwningOpRef<ModuleOp> module = buildModule(ctx, c, values, rng);
  ASSERT_TRUE(succeeded(verify(*module))) << diags.text;

  PassManager pm(&ctx);
  pm.addPass(createDsVerifyInput());
  pm.addPass(createDsAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module))) << diags.text;

  Interpreter interp(*module, seed);
  interp.setStep(3);
  ASSERT_TRUE(succeeded(interp.initVariables())) << diags.text;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].elt != Elt::I32)
      interp.variable(paramName(i)) = values[i];

  interp.setRounding(!c.exact);
  std::vector<ref::Tensor> out;
  ASSERT_TRUE(succeeded(interp.run("micro_step", {}, out))) << diags.text;

  interp.setRounding(false);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].elt == Elt::I32)
      continue;
    std::string name = paramName(i);
    ASSERT_TRUE(interp.hasVariable(name + ".grad"))
        << "ds-autodiff gave @" << name << " no gradient accumulator";
    ref::Tensor grad = interp.variable(name + ".grad");
    ASSERT_EQ(grad.shape, values[i].shape);
    ref::Tensor &param = interp.variable(name);
    double worst = -1;
    size_t worstIndex = 0;
    double worstFd = 0;
    for (size_t j = 0; j < param.data.size(); ++j) {
      double fd = finiteDifference(interp, param, j);
      double err =
          std::abs(grad.data[j] - fd) / std::max(1.0, std::abs(grad.data[j]));
      if (!(err <= worst)) {
        worst = err;
        worstIndex = j;
        worstFd = fd;
      }
    }
    EXPECT_LE(worst, kTolerance)
        << "@" << name << "[" << worstIndex << "] (flat index): autodiff "
        << grad.data[worstIndex] << ", finite differences " << worstFd;
  }
}

} // namespace dsc::vjptest

#endif // DSC_TEST_COMPILER_VJPTESTSUPPORT_H
