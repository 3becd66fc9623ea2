//===- LoweringImpl.h - the state of one plan lowering ----------*- C++ -*-===//
//
// Private to compiler/plan: the Lowering class behind lowerToPlan, whose
// jobs live in one file each: Lowering.cpp (driver),
// VariableLayout.cpp (persistent state packed per category) and
// InstructionSelection.cpp (ops to kernel calls, store forwarding,
// attributes, FLOPs). The optimizer's fusion and placement are passes over
// the plan dialect it writes (OptimizerFusion.cpp, ArenaAllocation.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_PLAN_LOWERINGIMPL_H
#define DSC_COMPILER_PLAN_LOWERINGIMPL_H

#include "compiler/plan/PlanModel.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace dsc::lowering {

using namespace mlir;
using namespace mlir::ds;

inline uint64_t alignUp(uint64_t x) {
  return (x + kStorageAlign - 1) / kStorageAlign * kStorageAlign;
}

inline uint64_t bytesOf(RankedTensorType t) {
  return static_cast<uint64_t>(t.getNumElements()) *
         dtypeSize(*dtypeOfElement(t.getElementType()));
}

/// A storage location (plan.storage): fixed (variables, constants,
/// inputs, laid out here) or a transient (what a program computes, placed
/// by liveness in plan-place).
struct Slot {
  Category category = Category::Activations;
  bool fixed = false;
  uint64_t offset = 0; ///< fixed slots only
  uint64_t bytes = 0;  ///< the bytes the slot holds
  std::string name;
  Space space = Space::Device;
};

struct Ref {
  int slot;
  RankedTensorType type;
  uint64_t offset = 0; ///< bytes into the slot (views of a part of it)
};

struct Pending {
  Pending() = default;
  Pending(std::string kernel, SmallVector<Ref> ins, SmallVector<Ref> outs,
          std::vector<int64_t> ints, std::vector<double> floats, Operation *op)
      : kernel(std::move(kernel)), ins(std::move(ins)), outs(std::move(outs)),
        ints(std::move(ints)), floats(std::move(floats)), op(op) {}

  std::string kernel;
  SmallVector<Ref> ins, outs;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  Operation *op = nullptr;
  Space space = Space::Device; ///< where it runs (plan.fbs Instr.space)
  /// A collective or a copy between memory spaces: it runs on a stream of
  /// its own (plan-assign-streams), and a marker waits for it.
  bool async = false;
  double flops = 0; ///< the kernel's, from its op
  /// A marker, no kernel: where the program needs the result of the
  /// asynchronous instruction with this index (its dist.wait).
  int awaits = -1;
};

/// Ops whose result is a view of their operand's bytes: reshapes, and
/// slices of a 1-D tensor (a contiguous range of it).
inline bool isView(Operation *op) {
  if (isa<ReshapeOp>(op))
    return true;
  auto slice = dyn_cast<SliceOp>(op);
  return slice && cast<RankedTensorType>(slice.getX().getType()).getRank() == 1;
}

/// `v`, or the value a chain of reshapes ending in `v` views, where each
/// value of the chain is read by nothing but the next.
Value singleUseViewRoot(Value v);

/// Whether `op`'s result may overwrite a same-shaped operand (the op says
/// so through KernelOpInterface).
inline bool isInPlaceSafe(Operation *op) {
  auto kernel = dyn_cast<KernelOpInterface>(op);
  return kernel && kernel.isInPlaceSafe();
}

class Lowering {
public:
  Lowering(ModuleOp module, PlanModel &plan) : module(module), plan(plan) {}

  LogicalResult run();

private:
  ModuleOp module;
  PlanModel &plan;
  llvm::StringMap<int> varSlot;                 // variable -> slot
  llvm::StringMap<int> groupParams, groupGrads; // dist.group -> flat slot
  std::vector<Slot> slots;                      // all programs
  std::map<std::tuple<int, const void *, uint64_t>, uint32_t>
      bufferOf; // (slot, type, offset)
  llvm::DenseMap<std::pair<Attribute, int>, int> constSlot; // (value, space)
  /// The program being lowered (its index in plan.programs), -1 before.
  int currentProgram = -1;
  /// @micro_step's input slots: @eval, which never runs beside it, reads
  /// its batch from the same buffers, and each @sample_T its row and
  /// position from their starts (the inputs arena holds what training
  /// writes, so predicted and measured bytes stay equal).
  SmallVector<std::pair<Type, int>> microInputs;
  /// @eval's own input slots when its batch differs from the step's.
  SmallVector<int> evalInputs;

  uint64_t &arena(Category c, Space space = Space::Device) {
    return (space == Space::Host ? plan.hostArenaBytes
                                 : plan.arenaBytes)[static_cast<int>(c)];
  }

  int fixedSlot(Category c, uint64_t bytes, std::string name, bool align = true,
                Space space = Space::Device) {
    uint64_t &end = arena(c, space);
    if (align)
      end = alignUp(end);
    slots.push_back({c, true, end, bytes, std::move(name), space});
    end += bytes;
    return slots.size() - 1;
  }

  uint32_t buffer(int slot, RankedTensorType type, uint64_t offset = 0) {
    auto key = std::make_tuple(slot, type.getAsOpaquePointer(), offset);
    auto it = bufferOf.find(key);
    if (it != bufferOf.end())
      return it->second;
    const Slot &s = slots[slot];
    PlanBuffer b;
    b.arena = s.category;
    b.space = s.space;
    b.offset = s.offset + offset;
    b.dtype = *dtypeOfElement(type.getElementType());
    b.shape.assign(type.getShape().begin(), type.getShape().end());
    b.name = s.name;
    b.storage = slot;
    b.viewOffset = offset;
    b.program = currentProgram;
    plan.buffers.push_back(std::move(b));
    bufferOf[key] = plan.buffers.size() - 1;
    return plan.buffers.size() - 1;
  }

  /// The variables' packing, in its steps (VariableLayout.cpp).
  class VariableLayout;
  LogicalResult layoutVariables();

  int constantSlot(ConstantOp c, Space space);

  /// Whether `v`, `store`'s value or what the value views through
  /// reshapes, can be computed directly into the variable.
  bool canForward(StoreOp store, Value v,
                  const DenseMap<Operation *, int> &position,
                  ArrayRef<LoadOp> loadsOfVar);

  /// The ops that read a variable through `loads`, looking through reshapes
  /// (views of the same bytes).
  static SmallVector<Operation *> readersOf(ArrayRef<LoadOp> loads);

  static bool readsVariable(Value v, ArrayRef<LoadOp> loads);

  /// One program's walk, its state and its steps (InstructionSelection.cpp).
  class ProgramLowering;
  LogicalResult lowerProgram(func::FuncOp func);

  std::vector<Ref> returned;
  DenseMap<Value, size_t> producerIndex;
  /// The asynchronous instructions (collectives, copies between spaces) by
  /// the dist op's result.
  DenseMap<Value, size_t> commOf;

  /// Appends an instruction; an asynchronous one (`async`) is recorded in
  /// commOf. Streams and events are passes over the plan module
  /// (plan-assign-streams, plan-insert-events).
  void push(std::vector<Pending> &pend, Pending p);

  /// Points the output of `v`'s producing instruction at `target`.
  void retarget(std::vector<Pending> &pend, Value v, int target);
};

} // namespace dsc::lowering

#endif // DSC_COMPILER_PLAN_LOWERINGIMPL_H
