//===- Interpreter.h - float64 reference interpreter of ds IR ---*- C++ -*-===//
//
// Evaluates `ds` IR op by op with the float64 reference kernels
// (runtime/reference): the oracle for gradient checks and, later, for the
// runtime's kernels. Simple and obviously right, never fast.
//
// Precision: every tensor is held as float64. By default each op's float
// result is then rounded to its element type (f32, f16, bf16), so f32 IR
// evaluates as f32 storage would (each op computed exactly, then stored),
// and function arguments and initial variable values are rounded the same
// way. Integer tensors hold integral doubles. setRounding(false) turns every
// rounding off (ds.cast becomes the identity): the IR is then evaluated in
// float64 whatever its types say, which is what finite differences through
// an f32 loss need.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_COMPILER_INTERPRETER_INTERPRETER_H
#define DSC_COMPILER_INTERPRETER_INTERPRETER_H

#include "runtime/reference/RefKernels.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace dsc {

/// What the ops that read the execution context (ds.dropout's mask, ds.cast)
/// see.
struct EvalContext {
  uint64_t seed = 0;
  uint32_t step = 0;
  /// Global index of the micro-batch's first sample (ds.dropout keys).
  uint64_t sampleOffset = 0;
  bool round = true;
};

/// The reference kernel's dtype for a float element type; std::nullopt for
/// integer types (and anything else).
std::optional<ref::DType> dtypeOf(mlir::Type elementType);

/// Evaluates one stateless ds op (everything but ds.load and ds.store) on
/// operand values given in operand order; returns one tensor per result, not
/// yet rounded to the result types. The error is the kernel's message, or
/// "interpreter: no rule for '<op>'".
ref::Result<std::vector<ref::Tensor>>
evaluateOp(mlir::Operation *op, llvm::ArrayRef<const ref::Tensor *> operands,
           const EvalContext &context);

/// ds.fused_elementwise (`op`): its body's ops evaluated in order on the
/// operands, each result rounded to its type (with context.round), as the
/// unfused ops would be; one tensor per result.
ref::Result<std::vector<ref::Tensor>>
evaluateFusedBody(mlir::Operation *op,
                  llvm::ArrayRef<const ref::Tensor *> operands,
                  const EvalContext &context);

class Interpreter {
public:
  /// Interprets `module`, which must outlive the interpreter. `seed` keys
  /// variable initialization and dropout masks.
  explicit Interpreter(mlir::ModuleOp module, uint64_t seed = 0);

  /// (Re)fills every ds.variable of the module from its initializer: zeros,
  /// ones, or N(0, std^2) drawn with ref::init on the stream
  /// rng::streamForName(name). Returns failure (after emitting an error at
  /// the variable) only if a kernel rejects the variable.
  mlir::LogicalResult initVariables();

  /// True once `name` holds a value (initVariables, or a ds.store).
  bool hasVariable(llvm::StringRef name) const;
  /// The state of a variable, for reading and writing. Writing a tensor of
  /// another shape makes the next ds.load of it fail. A name without a value
  /// is a bug in the caller and aborts; check hasVariable first.
  ref::Tensor &variable(llvm::StringRef name);
  const llvm::StringMap<ref::Tensor> &variables() const { return state; }

  /// The step ds.dropout draws its mask for.
  void setStep(uint32_t step) { context.step = step; }
  void setSampleOffset(uint64_t offset) { context.sampleOffset = offset; }
  uint32_t getStep() const { return context.step; }
  /// Whether results are rounded to their element types (see the top of this
  /// file); on by default.
  void setRounding(bool enabled) { context.round = enabled; }
  bool getRounding() const { return context.round; }

  /// Runs `func.func @<func>` on `args` (one per argument, shapes as
  /// declared) and replaces `results` with its return values. On failure
  /// emits an error (mlir::emitError) at the op that failed, naming the
  /// kernel's message; variables keep whatever the function stored before
  /// the failure.
  mlir::LogicalResult run(llvm::StringRef func,
                          llvm::ArrayRef<ref::Tensor> args,
                          std::vector<ref::Tensor> &results);

private:
  mlir::ModuleOp module;
  EvalContext context;
  llvm::StringMap<ref::Tensor> state;
};

} // namespace dsc

#endif // DSC_COMPILER_INTERPRETER_INTERPRETER_H
