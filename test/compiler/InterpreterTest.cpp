//===- InterpreterTest.cpp - the float64 interpreter
//------------------------===//

#include "test/compiler/VJPTestSupport.h"

using namespace mlir;
using namespace mlir::ds;
using namespace dsc::vjptest;
namespace ref = dsc::ref;
using dsc::Interpreter;

namespace {

//===----------------------------------------------------------------------===//
// The interpreter itself
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> parse(MLIRContext &ctx, llvm::StringRef source) {
  loadDialects(ctx);
  return parseSourceString<ModuleOp>(source, &ctx);
}

TEST(Interpreter, RoundsResultsToTheirElementType) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf64>) {
      %c = ds.constant dense<1.0e-09> : tensor<2xf32>
      %r = ds.add %a, %c : tensor<2xf32>, tensor<2xf32>
      %w = ds.cast %a : tensor<2xf32> -> tensor<2xf64>
      return %r, %w : tensor<2xf32>, tensor<2xf64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  std::vector<ref::Tensor> out;
  ref::Tensor a({2}, {1.0, 0.1});
  ASSERT_TRUE(succeeded(interp.run("f", {a}, out))) << diags.text;
  float tenth = 0.1f;
  // 1 + 1e-9 is 1 in f32; the argument 0.1 arrives as the float 0.1f.
  EXPECT_EQ(out[0].data[0], 1.0);
  EXPECT_EQ(out[1].data[1], double(tenth));

  interp.setRounding(false);
  ASSERT_TRUE(succeeded(interp.run("f", {a}, out))) << diags.text;
  EXPECT_EQ(out[0].data[0], 1.0 + double(1.0e-09f));
  EXPECT_EQ(out[1].data[1], 0.1);
}

TEST(Interpreter, VariablesInitializeFromTheirNameStream) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    ds.variable param @w : tensor<3x4xf64> init normal std 2.000000e+00
    ds.variable param @h : tensor<5xf16> init normal std 1.000000e+00
    ds.variable param @o : tensor<2xf32> init ones
    func.func @forward() -> tensor<f32> {
      %w = ds.load @w : tensor<3x4xf64>
      %s = ds.reduce_sum %w axes [0, 1] : tensor<3x4xf64> -> tensor<f64>
      %l = ds.cast %s : tensor<f64> -> tensor<f32>
      return %l : tensor<f32>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module, /*seed=*/1234);
  EXPECT_FALSE(interp.hasVariable("w"));
  ASSERT_TRUE(succeeded(interp.initVariables()));
  auto w = ref::init(ref::InitKind::Normal, {3, 4}, 1234,
                     dsc::rng::streamForName("w"), 0.0, 2.0);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(interp.variable("w").data, w.value.data);
  auto h = ref::init(ref::InitKind::Normal, {5}, 1234,
                     dsc::rng::streamForName("h"), 0.0, 1.0);
  ASSERT_TRUE(h.ok());
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(interp.variable("h").data[i],
              ref::roundToDType(h.value.data[i], ref::DType::f16));
  EXPECT_EQ(interp.variable("o").data, std::vector<double>(2, 1.0));

  std::vector<ref::Tensor> out;
  ASSERT_TRUE(succeeded(interp.run("forward", {}, out))) << diags.text;
  double sum = 0;
  for (double v : w.value.data)
    sum += v;
  EXPECT_EQ(out[0].data[0], ref::roundToDType(sum, ref::DType::f32));
}

TEST(Interpreter, StoresAndLoadsInProgramOrder) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    ds.variable param @v : tensor<2xf64> init zeros
    func.func @bump(%x: tensor<2xf64>) -> tensor<2xf64> {
      %a = ds.load @v : tensor<2xf64>
      %b = ds.add %a, %x : tensor<2xf64>, tensor<2xf64>
      ds.store %b, @v : tensor<2xf64>
      %c = ds.load @v : tensor<2xf64>
      %d = ds.add %c, %x : tensor<2xf64>, tensor<2xf64>
      return %d : tensor<2xf64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  ASSERT_TRUE(succeeded(interp.initVariables()));
  std::vector<ref::Tensor> out;
  ref::Tensor x({2}, {1.0, 2.0});
  ASSERT_TRUE(succeeded(interp.run("bump", {x}, out))) << diags.text;
  EXPECT_EQ(out[0].data, (std::vector<double>{2.0, 4.0}));
  ASSERT_TRUE(succeeded(interp.run("bump", {x}, out))) << diags.text;
  EXPECT_EQ(interp.variable("v").data, (std::vector<double>{2.0, 4.0}));
  EXPECT_EQ(out[0].data, (std::vector<double>{3.0, 6.0}));
}

TEST(Interpreter, IntegerConstantsIotaAndEmbedding) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%t: tensor<3x2xf64>) -> (tensor<2x2xf64>, tensor<2x3xi64>) {
      %i = ds.constant dense<[2, 0]> : tensor<2xi32>
      %e = ds.embedding %t, %i : tensor<3x2xf64>, tensor<2xi32> -> tensor<2x2xf64>
      %p = ds.iota dim 1 : tensor<2x3xi64>
      return %e, %p : tensor<2x2xf64>, tensor<2x3xi64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  std::vector<ref::Tensor> out;
  ref::Tensor table({3, 2}, {0, 1, 2, 3, 4, 5});
  ASSERT_TRUE(succeeded(interp.run("f", {table}, out))) << diags.text;
  EXPECT_EQ(out[0].data, (std::vector<double>{4, 5, 0, 1}));
  EXPECT_EQ(out[1].data, (std::vector<double>{0, 1, 2, 0, 1, 2}));
}

TEST(Interpreter, DropoutMaskFollowsSeedAndStep) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%x: tensor<64xf64>) -> tensor<64xf64> {
      %y = ds.dropout %x rate 5.000000e-01 id 7 : tensor<64xf64>
      return %y : tensor<64xf64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module, /*seed=*/99);
  ref::Tensor x(std::vector<int64_t>{64}, std::vector<double>(64, 1.0));
  std::vector<ref::Tensor> step4, step5;
  interp.setStep(4);
  ASSERT_TRUE(succeeded(interp.run("f", {x}, step4))) << diags.text;
  interp.setStep(5);
  ASSERT_TRUE(succeeded(interp.run("f", {x}, step5))) << diags.text;
  auto expected4 = ref::dropout(x, 0.5, 99, 7, 4);
  auto expected5 = ref::dropout(x, 0.5, 99, 7, 5);
  ASSERT_TRUE(expected4.ok() && expected5.ok());
  EXPECT_EQ(step4[0].data, expected4.value.data);
  EXPECT_EQ(step5[0].data, expected5.value.data);
  EXPECT_NE(step4[0].data, step5[0].data);
}

// Phase fused's matmul ops mean their unfused ops, every intermediate
// rounded to its type: in bf16 the fused and unfused results are the same
// doubles.
TEST(Interpreter, FusedMatmulsEqualTheirUnfusedOps) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%a: tensor<3x5xbf16>, %w: tensor<4x5xbf16>, %b: tensor<4xbf16>, %x: tensor<3x4xbf16>)
        -> (tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<4xbf16>,
            tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<4xbf16>) {
      %m = ds.matmul %a, %w {transpose_rhs} : tensor<3x5xbf16>, tensor<4x5xbf16> -> tensor<3x4xbf16>
      %y = ds.add %m, %b : tensor<3x4xbf16>, tensor<4xbf16>
      %s, %g = ds.bias_gelu tanh %m, %b : tensor<3x4xbf16>, tensor<4xbf16>
      %d = ds.gelu_grad tanh %x, %m : tensor<3x4xbf16>
      %db = ds.reduce_sum %d axes [0] : tensor<3x4xbf16> -> tensor<4xbf16>
      %fy = ds.matmul_bias %a, %w, %b {transpose_rhs} : tensor<3x5xbf16>, tensor<4x5xbf16>, tensor<4xbf16> -> tensor<3x4xbf16>
      %fs, %fg = ds.matmul_bias_gelu tanh %a, %w, %b {transpose_rhs} : tensor<3x5xbf16>, tensor<4x5xbf16>, tensor<4xbf16> -> tensor<3x4xbf16>, tensor<3x4xbf16>
      %fd, %fdb = ds.matmul_gelu_grad tanh %a, %w, %x {transpose_rhs} : tensor<3x5xbf16>, tensor<4x5xbf16>, tensor<3x4xbf16> -> tensor<3x4xbf16>, tensor<4xbf16>
      return %y, %s, %g, %d, %db, %fy, %fs, %fg, %fd, %fdb
          : tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<4xbf16>,
            tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>, tensor<4xbf16>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  auto values = [](std::vector<int64_t> shape, double scale) {
    ref::Tensor t(std::move(shape));
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] = scale * (double(i % 7) - 3.0) / 7.0;
    return t;
  };
  std::vector<ref::Tensor> out;
  ASSERT_TRUE(succeeded(interp.run("f",
                                   {values({3, 5}, 1.3), values({4, 5}, 0.7),
                                    values({4}, 0.9), values({3, 4}, 2.1)},
                                   out)))
      << diags.text;
  ASSERT_EQ(out.size(), 10u);
  const char *names[] = {"matmul_bias", "matmul_bias_gelu's sum",
                         "matmul_bias_gelu's GELU", "matmul_gelu_grad's grad",
                         "matmul_gelu_grad's dbias"};
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(out[i + 5].data, out[i].data) << names[i];
}

TEST(Interpreter, KernelErrorsAreReportedAtTheOp) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%l: tensor<2x3xf64>) -> tensor<f64> {
      %t = ds.constant dense<[1, 5]> : tensor<2xi32>
      %c = ds.cross_entropy %l, %t : tensor<2x3xf64>, tensor<2xi32> -> tensor<f64> loc("the_loss")
      return %c : tensor<f64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  std::vector<ref::Tensor> out;
  EXPECT_TRUE(failed(interp.run("f", {ref::Tensor({2, 3})}, out)));
  EXPECT_NE(diags.text.find("the_loss"), std::string::npos) << diags.text;
  EXPECT_NE(diags.text.find("interpreter: 'ds.cross_entropy' failed: "
                            "cross_entropy: target 5"),
            std::string::npos)
      << diags.text;
}

TEST(Interpreter, UnknownOpsAndBadArgumentsAreErrors) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @g(%x: tensor<2xf64>) -> tensor<2xf64> {
      return %x : tensor<2xf64>
    }
    func.func @f(%x: tensor<2xf64>) -> tensor<2xf64> {
      %y = func.call @g(%x) : (tensor<2xf64>) -> tensor<2xf64>
      return %y : tensor<2xf64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  std::vector<ref::Tensor> out;
  EXPECT_TRUE(failed(interp.run("f", {ref::Tensor({2})}, out)));
  EXPECT_NE(diags.text.find("interpreter: no rule for 'func.call'"),
            std::string::npos)
      << diags.text;
  EXPECT_TRUE(failed(interp.run("g", {ref::Tensor({3})}, out)));
  EXPECT_NE(diags.text.find("argument #0 of @g has shape [3]"),
            std::string::npos)
      << diags.text;
  EXPECT_TRUE(failed(interp.run("h", {}, out)));
  EXPECT_NE(diags.text.find("no func.func @h"), std::string::npos)
      << diags.text;
}

} // namespace
