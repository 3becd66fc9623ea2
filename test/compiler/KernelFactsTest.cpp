//===- KernelFactsTest.cpp - the ops' kernel facts against the CPU table --===//
//
// Every ds op that runs as a kernel declares its kernel's contract in ODS
// (DsOps.td), from which the runtime's contract table is generated, and its
// attribute encoding, FLOPs and in-place safety in C++ (KernelOpInterface,
// DsKernelFacts.cpp). This test holds the hand-written half to the
// contract: each kernel op of test/dialects/ds/ops.mlir (which has every ds
// op) has a contract whose arity and attribute counts it matches and one of
// whose dtype variants takes its operands, and every kernel op the dialect
// registers appears there.
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/kernels/KernelContract.h"
#include "runtime/kernels/KernelSignature.h"
#include "test/compiler/TestSupport.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::ds;

namespace {

std::vector<dsc::DType> dtypesOf(TypeRange types) {
  std::vector<dsc::DType> out;
  for (Type t : types)
    out.push_back(
        dtypeOfElement(cast<RankedTensorType>(t).getElementType()).value());
  return out;
}

struct Corpus {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  std::string diagnostics;
};

std::unique_ptr<Corpus> parseOpsMlir() {
  auto c = std::make_unique<Corpus>();
  c->ctx.loadDialect<DSDialect, func::FuncDialect>();
  dsc::test::DiagnosticCapture diags(c->ctx);
  c->module = parseSourceFile<ModuleOp>(
      DSC_SOURCE_DIR "/test/dialects/ds/ops.mlir", &c->ctx);
  c->diagnostics = diags.text;
  return c;
}

TEST(KernelFacts, EveryKernelOpMatchesItsContract) {
  std::unique_ptr<Corpus> c = parseOpsMlir();
  ASSERT_TRUE(c->module) << c->diagnostics;
  llvm::StringSet<> seen;
  int checked = 0;
  c->module->walk([&](KernelOpInterface kernel) {
    Operation *op = kernel.getOperation();
    std::string name = kernel.getKernelName().str();
    seen.insert(op->getName().getStringRef());
    SCOPED_TRACE(name);
    const dsc::rt::KernelContract *contract = dsc::rt::findKernelContract(name);
    ASSERT_NE(contract, nullptr) << "no kernel contract " << name;
    const dsc::rt::KernelContract &k = *contract;
    SmallVector<int64_t> ints;
    SmallVector<double> floats;
    kernel.getKernelAttributes(ints, floats);
    if (k.numInputs >= 0) {
      EXPECT_EQ(int(op->getNumOperands()), k.numInputs);
    }
    if (k.numOutputs >= 0) {
      EXPECT_EQ(int(op->getNumResults()), k.numOutputs);
    }
    if (k.numIntAttrs >= 0) {
      EXPECT_EQ(int(ints.size()), k.numIntAttrs);
    }
    if (k.numFloatAttrs >= 0) {
      EXPECT_EQ(int(floats.size()), k.numFloatAttrs);
    }
    std::vector<dsc::DType> in = dtypesOf(op->getOperandTypes()),
                            out = dtypesOf(op->getResultTypes());
    bool variant = false;
    for (size_t c = 0; c < dsc::rt::kNumKernelColumns; ++c)
      for (std::string_view sig : k.columns[c])
        variant |= dsc::rt::signatureMatches(sig, {in.data(), in.size()},
                                             {out.data(), out.size()});
    EXPECT_TRUE(variant) << "no variant for "
                         << dsc::rt::dtypeSignature({in.data(), in.size()},
                                                    {out.data(), out.size()});
    EXPECT_GE(kernel.getFlops(), 0.0);
    ++checked;
  });
  EXPECT_GT(checked, 50);
  for (RegisteredOperationName name : c->ctx.getRegisteredOperations())
    if (name.getDialectNamespace() == "ds" &&
        name.hasInterface<KernelOpInterface>()) {
      EXPECT_TRUE(seen.contains(name.getStringRef()))
          << name.getStringRef().str()
          << " is a kernel op but test/dialects/ds/ops.mlir has none";
    }
  // A contract named like a ds op belongs to a kernel op (the others are
  // kernels no single op lowers to: ds.copy, ds.fill, ds.adamw_round).
  for (const dsc::rt::KernelContract &k : dsc::rt::kKernelContracts) {
    std::optional<RegisteredOperationName> op =
        RegisteredOperationName::lookup(k.name, &c->ctx);
    if (op) {
      EXPECT_TRUE(op->hasInterface<KernelOpInterface>()) << k.name;
    }
  }
}

// The encodings Kernel.h documents, on a few ops that have several.
TEST(KernelFacts, AttributeEncodingsFlopsAndInPlaceSafety) {
  std::unique_ptr<Corpus> c = parseOpsMlir();
  ASSERT_TRUE(c->module) << c->diagnostics;
  auto first = [&](StringRef opName) -> KernelOpInterface {
    KernelOpInterface found;
    c->module->walk([&](KernelOpInterface k) {
      if (!found && k->getName().getStringRef() == opName)
        found = k;
    });
    return found;
  };
  auto attrs = [](KernelOpInterface k) {
    SmallVector<int64_t> ints;
    SmallVector<double> floats;
    k.getKernelAttributes(ints, floats);
    return std::make_pair(std::vector<int64_t>(ints.begin(), ints.end()),
                          std::vector<double>(floats.begin(), floats.end()));
  };
  using V = std::vector<int64_t>;
  using F = std::vector<double>;
  // ds.matmul %x, %w {transpose_rhs}: [2,5,8] x [12,8]^T -> [2,5,12].
  KernelOpInterface mm = first("ds.matmul");
  ASSERT_TRUE(mm);
  EXPECT_EQ(attrs(mm), std::make_pair(V{0, 1}, F{}));
  EXPECT_EQ(mm.getFlops(), 2.0 * 2 * 5 * 12 * 8);
  EXPECT_FALSE(mm.isInPlaceSafe());
  // ds.attention scale 0.5 causal over [2,3,5,4].
  KernelOpInterface at = first("ds.attention");
  ASSERT_TRUE(at);
  EXPECT_EQ(attrs(at), std::make_pair(V{1, 0}, F{0.5})); // causal, seq_major
  EXPECT_EQ(at.getFlops(), 4.0 * 2 * 3 * 5 * 5 * 4);
  EXPECT_EQ(first("ds.attention_grad").getFlops(), 10.0 * 2 * 3 * 5 * 5 * 4);
  // ds.adamw betas(0.9, 0.95) eps 1e-8 weight_decay 0.1, in place.
  KernelOpInterface adam = first("ds.adamw");
  ASSERT_TRUE(adam);
  EXPECT_EQ(attrs(adam), std::make_pair(V{}, F{0.9, 0.95, 1e-8, 0.1}));
  EXPECT_TRUE(adam.isInPlaceSafe());
  // ds.gelu tanh, ds.dropout rate 0.1 id 7 (whole: 1 part, along 0),
  // ds.slice offsets [0, 2].
  EXPECT_EQ(attrs(first("ds.gelu")), std::make_pair(V{1}, F{}));
  EXPECT_EQ(attrs(first("ds.dropout")), std::make_pair(V{7, 1, 0, 0}, F{0.1}));
  EXPECT_EQ(attrs(first("ds.slice")), std::make_pair(V{0, 2}, F{}));
  // Elementwise: one FLOP per output element; in place unless it compares.
  KernelOpInterface add = first("ds.add");
  EXPECT_EQ(add.getFlops(), 6.0);
  EXPECT_TRUE(add.isInPlaceSafe());
  EXPECT_FALSE(first("ds.equal").isInPlaceSafe());
  EXPECT_FALSE(first("ds.softmax").isInPlaceSafe());
  EXPECT_EQ(add.getKernelName().str(), "ds.add");
}

} // namespace
