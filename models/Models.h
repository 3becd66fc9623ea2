//===- Models.h - built-in model definitions --------------------*- C++ -*-===//
//
// Models written with the GraphBuilder, selected by a spec string
// `NAME[:key=value,...]`, e.g.
//
//   gpt2:n_layer=2,n_head=2,n_embd=64,block_size=64,vocab_size=256
//
// Every model accepts `batch_size=N`, which overrides the batch size the
// caller passes. Options left out take the defaults listed by
// printModelHelp.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_MODELS_MODELS_H
#define DSC_MODELS_MODELS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace dsc::builder {
class GraphBuilder;
} // namespace dsc::builder

namespace dsc::models {

/// Builds the model `spec` names as a verified module in dsc's input
/// contract. On a bad spec returns null and sets `error` to one line naming
/// the model and the offending key. `seqLen` is T of the batch: 0 for the
/// model's block_size, or a shorter length (the sampling programs' buckets:
/// the weights are the same, position tables keep block_size rows).
mlir::OwningOpRef<mlir::ModuleOp>
buildModel(mlir::MLIRContext &ctx, llvm::StringRef spec, int64_t batchSize,
           std::string &error, int64_t seqLen = 0);

/// Lists every model with its options and their defaults (for --help).
void printModelHelp(llvm::raw_ostream &os);

//===----------------------------------------------------------------------===//
// For model definitions
//===----------------------------------------------------------------------===//

enum class OptionKind { Int, Bool, Float };

struct OptionSpec {
  llvm::StringLiteral name;
  OptionKind kind;
  /// Parsed like a user's value; empty when the model derives it (see
  /// ModelDef::finalize).
  llvm::StringLiteral defaultValue;
  llvm::StringLiteral help;
  /// Smallest accepted value of an Int option.
  int64_t minValue = 1;
};

/// The resolved options of one model: defaults overridden by the spec.
class ModelOptions {
public:
  bool has(llvm::StringRef name) const {
    return ints.count(name) || floats.count(name);
  }
  /// Int and Bool options.
  int64_t getInt(llvm::StringRef name) const;
  double getFloat(llvm::StringRef name) const;
  void setInt(llvm::StringRef name, int64_t value) { ints[name] = value; }
  void setFloat(llvm::StringRef name, double value) { floats[name] = value; }

private:
  llvm::StringMap<int64_t> ints;
  llvm::StringMap<double> floats;
};

struct ModelDef {
  llvm::StringLiteral name;
  llvm::StringLiteral summary;
  llvm::ArrayRef<OptionSpec> options;
  /// Fills derived defaults and checks the constraints between options.
  /// Returns "" or an error message without the "<model>: " prefix.
  std::string (*finalize)(ModelOptions &opts);
  /// Builds @forward (beginForward included) on token and target batches
  /// of [batchSize, seqLen] and returns the loss; seqLen is at most the
  /// model's block_size.
  mlir::Value (*build)(builder::GraphBuilder &gb, const ModelOptions &opts,
                       int64_t batchSize, int64_t seqLen);
};

/// A number as a user would write it ("0.1", "1e-05"), for error messages.
std::string formatNumber(double value);

const ModelDef &gpt2Model();
const ModelDef &llamaModel();
const ModelDef &mlpModel();

} // namespace dsc::models

#endif // DSC_MODELS_MODELS_H
