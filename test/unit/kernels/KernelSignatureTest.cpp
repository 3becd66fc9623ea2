//===- KernelSignatureTest.cpp - dtype signatures of kernel variants ------===//

#include "runtime/kernels/KernelSignature.h"

#include <gtest/gtest.h>

#include <vector>

using namespace dsc;
using namespace dsc::rt;

namespace {

bool matches(std::string_view sig, std::vector<DType> in,
             std::vector<DType> out) {
  return signatureMatches(sig, {in.data(), in.size()},
                          {out.data(), out.size()});
}

constexpr DType F32 = DType::f32, F16 = DType::f16, BF16 = DType::bf16,
                F64 = DType::f64, I32 = DType::i32, I64 = DType::i64;

TEST(KernelSignature, FixedOperands) {
  EXPECT_TRUE(matches("f32,f32->f32", {F32, F32}, {F32}));
  EXPECT_FALSE(matches("f32,f32->f32", {F32, BF16}, {F32}));
  EXPECT_FALSE(matches("f32,f32->f32", {F32, F32}, {F16}));
  // Counts must agree as well.
  EXPECT_FALSE(matches("f32,f32->f32", {F32}, {F32}));
  EXPECT_FALSE(matches("f32,f32->f32", {F32, F32, F32}, {F32}));
  EXPECT_FALSE(matches("f32,f32->f32", {F32, F32}, {}));
  EXPECT_TRUE(matches("->f32", {}, {F32}));
  EXPECT_FALSE(matches("->f32", {F32}, {F32}));
}

TEST(KernelSignature, ChoicesAndClasses) {
  EXPECT_TRUE(matches("f32,idx->f32", {F32, I32}, {F32}));
  EXPECT_TRUE(matches("f32,idx->f32", {F32, I64}, {F32}));
  EXPECT_FALSE(matches("f32,idx->f32", {F32, F32}, {F32}));
  for (DType t : {F32, F16, BF16, F64})
    EXPECT_TRUE(matches("float->float", {t}, {F16})) << dtypeName(t);
  EXPECT_FALSE(matches("float->float", {I32}, {F32}));
  EXPECT_TRUE(matches("->f32|i64", {}, {I64}));
  EXPECT_FALSE(matches("->f32|i64", {}, {I32}));
  EXPECT_TRUE(matches("any->any", {I64}, {BF16}));
}

TEST(KernelSignature, TypeVariableBindsOnce) {
  EXPECT_TRUE(matches("T->T", {BF16}, {BF16}));
  EXPECT_FALSE(matches("T->T", {BF16}, {F32}));
  EXPECT_TRUE(matches("T*->T", {I32, I32, I32}, {I32}));
  EXPECT_FALSE(matches("T*->T", {I32, F32}, {I32}));
  EXPECT_FALSE(matches("T*->T", {I32, I32}, {F32}));
}

TEST(KernelSignature, RepeatedLastElement) {
  // Layer norm: x, w and an optional bias.
  EXPECT_TRUE(matches("f32*->f32", {F32, F32}, {F32}));
  EXPECT_TRUE(matches("f32*->f32", {F32, F32, F32}, {F32}));
  EXPECT_TRUE(matches("f32*->f32", {}, {F32}));
  EXPECT_FALSE(matches("f32*->f32", {F32, F16}, {F32}));
  EXPECT_TRUE(matches("f32,idx*->f32", {F32}, {F32}));
  EXPECT_TRUE(matches("f32,idx*->f32", {F32, I32, I64}, {F32}));
  EXPECT_FALSE(matches("f32,idx*->f32", {I32}, {F32}));
}

TEST(KernelSignature, MalformedSignaturesAreNamed) {
  std::string error;
  EXPECT_TRUE(checkSignature("f32,idx*->T", error)) << error;
  EXPECT_TRUE(checkSignature("->", error)) << error;
  EXPECT_FALSE(checkSignature("f32,f32", error));
  EXPECT_EQ(error, "no '->'");
  EXPECT_FALSE(checkSignature("f32,half->f32", error));
  EXPECT_EQ(error, "unknown dtype 'half'");
  EXPECT_FALSE(checkSignature("f32*,f32->f32", error));
  EXPECT_EQ(error, "'*' on 'f32*', not the last element");
  EXPECT_FALSE(checkSignature("T|f32->f32", error));
  EXPECT_EQ(error, "'T' in the choice 'T|f32'");
  // A malformed signature matches nothing.
  EXPECT_FALSE(matches("f32", {F32}, {}));
}

TEST(KernelSignature, InstructionDTypesInTheSameNotation) {
  std::vector<DType> in = {BF16, BF16}, out = {F32};
  EXPECT_EQ(dtypeSignature({in.data(), in.size()}, {out.data(), out.size()}),
            "bf16,bf16->f32");
  EXPECT_EQ(dtypeSignature({}, {out.data(), out.size()}), "->f32");
}

} // namespace
