//===- GraphBuilder.h - write ds models in C++ ------------------*- C++ -*-===//
//
// A small layer over mlir::OpBuilder that produces dsc's input contract: a
// module of `ds.variable param` declarations and one
//
//   func.func @forward(%tokens: tensor<BxTxi32>, %targets: tensor<BxTxi32>)
//       -> tensor<f32>
//
// returning the scalar loss. Scopes play the part of torch.nn submodules: a
// parameter declared inside `Scope(gb, "attn")` within "transformer.h.0" is
// named "transformer.h.0.attn.<name>", and the ops built there carry
// loc("transformer.h.0.attn"), so diagnostics name the layer.
//
// Shapes are the caller's responsibility: an op whose operand shapes do not
// fit aborts in its builder. Models validate their options first.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_FRONTENDS_BUILDER_GRAPHBUILDER_H
#define DSC_FRONTENDS_BUILDER_GRAPHBUILDER_H

#include "dialects/ds/DsOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace dsc::builder {

class GraphBuilder {
public:
  /// Starts an empty module named `modelName` (loads the ds and func
  /// dialects into `ctx`).
  GraphBuilder(mlir::MLIRContext &ctx, llvm::StringRef modelName);

  /// Enters a submodule for as long as the Scope lives. Scopes nest and must
  /// be destroyed in reverse order of creation (use them as locals).
  class Scope {
  public:
    Scope(GraphBuilder &gb, llvm::StringRef name);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    GraphBuilder &gb;
  };

  //===--------------------------------------------------------------------===//
  // Module structure
  //===--------------------------------------------------------------------===//

  /// Creates @forward with token and target arguments of shape
  /// [batch, seqLen] (i32) and moves the insertion point into it. Call once,
  /// before building any op.
  void beginForward(int64_t batch, int64_t seqLen);
  mlir::Value tokens() const { return tokensArg; }
  mlir::Value targets() const { return targetsArg; }
  /// Returns `loss` from @forward and hands over the module.
  mlir::OwningOpRef<mlir::ModuleOp> finish(mlir::Value loss);

  mlir::OpBuilder &builder() { return b; }
  /// loc("<current scope path>"), or loc("<model name>") outside any scope.
  mlir::Location loc() const;
  /// The current scope path joined with `name` by a dot.
  std::string qualify(llvm::StringRef name) const;
  /// tensor<shape x f32>.
  mlir::RankedTensorType tensorType(llvm::ArrayRef<int64_t> shape) const;

  //===--------------------------------------------------------------------===//
  // Parameters
  //===--------------------------------------------------------------------===//

  /// Declares `ds.variable param @<scope>.<name>` the first time and returns
  /// a fresh `ds.load` of it. Asking again for a name that qualifies to an
  /// existing variable only loads it. Redeclaring with another shape or init
  /// is a bug in the model and aborts.
  mlir::Value param(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                    mlir::ds::InitKind init,
                    std::optional<double> initStd = std::nullopt);
  /// A fresh `ds.load` of the variable declared under the full name
  /// `qualifiedName`, whatever the current scope: how weights are tied
  /// (GPT-2's lm_head reads "transformer.wte.weight"). Aborts if there is no
  /// such variable.
  mlir::Value load(llvm::StringRef qualifiedName);
  /// Marks the declared parameter `qualifiedName` as a projection whose
  /// rows are `heads` attention heads (ds.attention_heads, which Muon's
  /// per_head_muon reads). Aborts if there is no such variable.
  void markAttentionHeads(llvm::StringRef qualifiedName, int64_t heads);

  //===--------------------------------------------------------------------===//
  // Layers: each opens a scope `name` holding `weight` (and `bias`)
  //===--------------------------------------------------------------------===//

  /// torch.nn.Linear: weight [out, in] ~ N(0, initStd^2), bias [out] zeros;
  /// y = x @ weight^T + bias.
  mlir::Value linear(mlir::Value x, llvm::StringRef name, int64_t in,
                     int64_t out, bool bias, double initStd);
  /// torch.nn.Embedding: weight [num, dim] ~ N(0, initStd^2) gathered by
  /// `indices`.
  mlir::Value embedding(mlir::Value indices, llvm::StringRef name, int64_t num,
                        int64_t dim, double initStd);
  /// LayerNorm over the last dimension: weight ones, bias zeros.
  mlir::Value layerNorm(mlir::Value x, llvm::StringRef name, int64_t dim,
                        bool bias, double eps);
  /// RMSNorm over the last dimension: weight ones.
  mlir::Value rmsNorm(mlir::Value x, llvm::StringRef name, int64_t dim,
                      double eps);
  /// Inverted dropout with a fresh site id; returns `x` itself when
  /// rate == 0.
  mlir::Value dropout(mlir::Value x, double rate);

  //===--------------------------------------------------------------------===//
  // Attention
  //===--------------------------------------------------------------------===//

  /// [B, T, H*D] -> [B, H, T, D].
  mlir::Value splitHeads(mlir::Value x, int64_t numHeads);
  /// [B, H, T, D] -> [B, T, H*D].
  mlir::Value mergeHeads(mlir::Value x);
  /// Causal scaled dot-product attention with scale 1/sqrt(D).
  mlir::Value causalAttention(mlir::Value q, mlir::Value k, mlir::Value v);
  /// Rotary position embedding of [..., T, D].
  mlir::Value rotary(mlir::Value x, double theta);

  //===--------------------------------------------------------------------===//
  // Plain ops at the current location
  //===--------------------------------------------------------------------===//

  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value relu(mlir::Value x);
  mlir::Value silu(mlir::Value x);
  mlir::Value gelu(mlir::Value x, mlir::ds::GeluApproximation approximate);
  mlir::Value matmul(mlir::Value lhs, mlir::Value rhs,
                     bool transposeRhs = false);
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> permutation);
  llvm::SmallVector<mlir::Value> split(mlir::Value x, int64_t axis,
                                       llvm::ArrayRef<int64_t> sizes);
  /// i32 indices along `dim` of a tensor of `shape`.
  mlir::Value iota(llvm::ArrayRef<int64_t> shape, int64_t dim);
  /// Mean cross-entropy of logits [..., V] against targets [...].
  mlir::Value crossEntropy(mlir::Value logits, mlir::Value targets,
                           int64_t ignoreIndex = -1);

private:
  mlir::MLIRContext &ctx;
  mlir::OpBuilder b;
  std::string modelName;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp forward;
  mlir::Value tokensArg, targetsArg;
  llvm::StringMap<mlir::ds::VariableOp> variables;
  /// Full dotted path of each open scope, innermost last.
  llvm::SmallVector<std::string> scopes;
  int64_t nextDropoutId = 0;
};

} // namespace dsc::builder

#endif // DSC_FRONTENDS_BUILDER_GRAPHBUILDER_H
