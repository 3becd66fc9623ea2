//===- GraphBuilder.cpp - write ds models in C++ --------------------------===//

#include "models/builder/GraphBuilder.h"

#include "dialects/ds/Contracts.h"

#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <cassert>
#include <cmath>

using namespace mlir;
using namespace dsc::builder;

static RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

GraphBuilder::GraphBuilder(MLIRContext &ctx, StringRef modelName)
    : ctx(ctx), b(&ctx), modelName(modelName.str()) {
  ctx.loadDialect<ds::DSDialect, func::FuncDialect>();
  module = ModuleOp::create(loc(), modelName);
  b.setInsertionPointToEnd(module->getBody());
}

GraphBuilder::Scope::Scope(GraphBuilder &gb, StringRef name) : gb(gb) {
  assert(!name.empty() && "a scope needs a name");
  gb.scopes.push_back(gb.qualify(name));
}

GraphBuilder::Scope::~Scope() { gb.scopes.pop_back(); }

//===----------------------------------------------------------------------===//
// Module structure
//===----------------------------------------------------------------------===//

Location GraphBuilder::loc() const {
  StringRef path = scopes.empty() ? StringRef(modelName) : scopes.back();
  return NameLoc::get(StringAttr::get(&ctx, path));
}

std::string GraphBuilder::qualify(StringRef name) const {
  if (scopes.empty())
    return name.str();
  return (Twine(scopes.back()) + "." + name).str();
}

RankedTensorType GraphBuilder::tensorType(ArrayRef<int64_t> shape) const {
  return RankedTensorType::get(shape, Float32Type::get(&ctx));
}

void GraphBuilder::beginForward(int64_t batch, int64_t seqLen) {
  assert(!forward && "beginForward called twice");
  auto ids = RankedTensorType::get({batch, seqLen}, b.getI32Type());
  auto type = b.getFunctionType({ids, ids}, {tensorType({})});
  forward = func::FuncOp::create(loc(), dsc::plan::kForwardFunction, type);
  module->push_back(forward);
  Block *entry = forward.addEntryBlock();
  tokensArg = entry->getArgument(0);
  targetsArg = entry->getArgument(1);
  tokensArg.setLoc(NameLoc::get(b.getStringAttr("tokens")));
  targetsArg.setLoc(NameLoc::get(b.getStringAttr("targets")));
  b.setInsertionPointToStart(entry);
}

OwningOpRef<ModuleOp> GraphBuilder::finish(Value loss) {
  assert(forward && "finish called before beginForward");
  b.create<func::ReturnOp>(loc(), loss);
  return std::move(module);
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

Value GraphBuilder::param(StringRef name, ArrayRef<int64_t> shape,
                          ds::InitKind init, std::optional<double> initStd) {
  std::string fullName = qualify(name);
  RankedTensorType type = tensorType(shape);
  FloatAttr stdAttr = initStd ? b.getF64FloatAttr(*initStd) : FloatAttr();
  auto it = variables.find(fullName);
  if (it == variables.end()) {
    // Declarations stay together at the top of the module, in the order the
    // model asks for them.
    OpBuilder decl(&ctx);
    if (forward)
      decl.setInsertionPoint(forward);
    else
      decl.setInsertionPointToEnd(module->getBody());
    auto var = decl.create<ds::VariableOp>(
        loc(), ds::VariableKind::param, StringRef(fullName),
        /*of=*/FlatSymbolRefAttr(), type, init, stdAttr);
    it = variables.try_emplace(fullName, var).first;
  } else {
    ds::VariableOp var = it->second;
    if (var.getType() != type || var.getInit() != init ||
        var.getStdAttr() != stdAttr)
      llvm::report_fatal_error(Twine("GraphBuilder: parameter '") + fullName +
                               "' redeclared with another shape or init");
  }
  return b.create<ds::LoadOp>(loc(), type, fullName);
}

Value GraphBuilder::load(StringRef qualifiedName) {
  auto it = variables.find(qualifiedName);
  if (it == variables.end())
    llvm::report_fatal_error(Twine("GraphBuilder: no parameter '") +
                             qualifiedName + "' to load");
  return b.create<ds::LoadOp>(loc(), it->second.getTensorType(), qualifiedName);
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

void GraphBuilder::markAttentionHeads(StringRef qualifiedName, int64_t heads) {
  auto it = variables.find(qualifiedName);
  if (it == variables.end())
    llvm::report_fatal_error(Twine("GraphBuilder: no parameter '") +
                             qualifiedName + "' to mark");
  it->second->setAttr(ds::kAttentionHeadsAttr, b.getI64IntegerAttr(heads));
}

Value GraphBuilder::linear(Value x, StringRef name, int64_t in, int64_t out,
                           bool bias, double initStd) {
  Scope scope(*this, name);
  Value w = param("weight", {out, in}, ds::InitKind::normal, initStd);
  Value y = matmul(x, w, /*transposeRhs=*/true);
  if (bias)
    y = add(y, param("bias", {out}, ds::InitKind::zeros));
  return y;
}

Value GraphBuilder::embedding(Value indices, StringRef name, int64_t num,
                              int64_t dim, double initStd) {
  Scope scope(*this, name);
  Value table = param("weight", {num, dim}, ds::InitKind::normal, initStd);
  return b.create<ds::EmbeddingOp>(loc(), table, indices);
}

Value GraphBuilder::layerNorm(Value x, StringRef name, int64_t dim, bool bias,
                              double eps) {
  Scope scope(*this, name);
  Value w = param("weight", {dim}, ds::InitKind::ones);
  Value bv = bias ? param("bias", {dim}, ds::InitKind::zeros) : Value();
  return b.create<ds::LayerNormOp>(loc(), x, w, bv, b.getF64FloatAttr(eps));
}

Value GraphBuilder::rmsNorm(Value x, StringRef name, int64_t dim, double eps) {
  Scope scope(*this, name);
  Value w = param("weight", {dim}, ds::InitKind::ones);
  return b.create<ds::RmsNormOp>(loc(), x, w, b.getF64FloatAttr(eps));
}

Value GraphBuilder::dropout(Value x, double rate) {
  if (rate == 0)
    return x;
  return b.create<ds::DropoutOp>(loc(), x, b.getF64FloatAttr(rate),
                                 b.getI64IntegerAttr(nextDropoutId++));
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

Value GraphBuilder::splitHeads(Value x, int64_t numHeads) {
  ArrayRef<int64_t> s = tensorOf(x).getShape();
  assert(s.size() == 3 && s[2] % numHeads == 0 && "expected [B, T, H*D]");
  Value split = reshape(x, {s[0], s[1], numHeads, s[2] / numHeads});
  return transpose(split, {0, 2, 1, 3});
}

Value GraphBuilder::mergeHeads(Value x) {
  ArrayRef<int64_t> s = tensorOf(x).getShape();
  assert(s.size() == 4 && "expected [B, H, T, D]");
  Value t = transpose(x, {0, 2, 1, 3});
  return reshape(t, {s[0], s[2], s[1] * s[3]});
}

Value GraphBuilder::causalAttention(Value q, Value k, Value v) {
  int64_t headSize = tensorOf(q).getShape().back();
  double scale = 1.0 / std::sqrt(static_cast<double>(headSize));
  return b.create<ds::AttentionOp>(loc(), q, k, v, b.getF64FloatAttr(scale),
                                   b.getUnitAttr(), UnitAttr());
}

Value GraphBuilder::rotary(Value x, double theta) {
  return b.create<ds::RotaryOp>(loc(), x, b.getF64FloatAttr(theta), UnitAttr(),
                                UnitAttr());
}

//===----------------------------------------------------------------------===//
// Plain ops
//===----------------------------------------------------------------------===//

Value GraphBuilder::add(Value lhs, Value rhs) {
  return b.create<ds::AddOp>(loc(), lhs, rhs);
}

Value GraphBuilder::mul(Value lhs, Value rhs) {
  return b.create<ds::MulOp>(loc(), lhs, rhs);
}

Value GraphBuilder::relu(Value x) { return b.create<ds::ReluOp>(loc(), x); }

Value GraphBuilder::silu(Value x) { return b.create<ds::SiluOp>(loc(), x); }

Value GraphBuilder::gelu(Value x, ds::GeluApproximation approximate) {
  return b.create<ds::GeluOp>(loc(), approximate, x);
}

Value GraphBuilder::matmul(Value lhs, Value rhs, bool transposeRhs) {
  return b.create<ds::MatmulOp>(loc(), lhs, rhs, /*transpose_lhs=*/false,
                                transposeRhs);
}

Value GraphBuilder::reshape(Value x, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, tensorOf(x).getElementType());
  return b.create<ds::ReshapeOp>(loc(), type, x);
}

Value GraphBuilder::transpose(Value x, ArrayRef<int64_t> permutation) {
  return b.create<ds::TransposeOp>(loc(), x, permutation);
}

SmallVector<Value> GraphBuilder::split(Value x, int64_t axis,
                                       ArrayRef<int64_t> sizes) {
  auto op = b.create<ds::SplitOp>(loc(), x, b.getI64IntegerAttr(axis),
                                  b.getDenseI64ArrayAttr(sizes));
  return SmallVector<Value>(op.getResults());
}

Value GraphBuilder::iota(ArrayRef<int64_t> shape, int64_t dim) {
  auto type = RankedTensorType::get(shape, b.getI32Type());
  return b.create<ds::IotaOp>(loc(), type, b.getI64IntegerAttr(dim));
}

Value GraphBuilder::crossEntropy(Value logits, Value targets,
                                 int64_t ignoreIndex) {
  return b.create<ds::CrossEntropyOp>(loc(), logits, targets,
                                      b.getI64IntegerAttr(ignoreIndex));
}
