//===- DistOps.cpp - dist dialect -----------------------------------------===//
#include "dialects/dist/DistOps.h"

#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::dist;

#include "dialects/dist/DistDialect.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/dist/DistOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.cpp.inc"

static constexpr llvm::StringLiteral kMicroBatchKey = "dist.micro_batch";
static constexpr llvm::StringLiteral kPartKey = "dist.part";

Location mlir::dist::withScheduleTag(Location loc, ScheduleTag tag) {
  MLIRContext *ctx = loc.getContext();
  Builder b(ctx);
  NamedAttribute fields[] = {
      b.getNamedAttr(kMicroBatchKey, b.getI64IntegerAttr(tag.microBatch)),
      b.getNamedAttr(kPartKey, b.getStringAttr(StringRef(&tag.part, 1)))};
  // A retag replaces the old tag rather than nesting a second one.
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (scheduleTagOf(loc) && fused.getLocations().size() == 1)
      loc = fused.getLocations()[0];
  return FusedLoc::get(ctx, {loc}, b.getDictionaryAttr(fields));
}

std::optional<ScheduleTag> mlir::dist::scheduleTagOf(Location loc) {
  auto fused = dyn_cast<FusedLoc>(loc);
  if (!fused)
    return std::nullopt;
  if (auto dict = dyn_cast_or_null<DictionaryAttr>(fused.getMetadata())) {
    auto mb = dict.getAs<IntegerAttr>(kMicroBatchKey);
    auto part = dict.getAs<StringAttr>(kPartKey);
    if (mb && part && part.size() == 1)
      return ScheduleTag{mb.getInt(), part.getValue()[0]};
  }
  for (Location inner : fused.getLocations())
    if (auto tag = scheduleTagOf(inner))
      return tag;
  return std::nullopt;
}

static LogicalResult verifySlices(Operation *op, RankedTensorType full,
                                  RankedTensorType slice, int64_t ranks) {
  if (ranks < 1)
    return op->emitOpError("needs at least one rank");
  if (full.getRank() != 1 || slice.getRank() != 1 ||
      full.getDimSize(0) != ranks * slice.getDimSize(0))
    return op->emitOpError("the full tensor must be 1-D with ")
           << ranks << " x the slice's elements, got " << full << " and "
           << slice;
  if (full.getElementType() != slice.getElementType())
    return op->emitOpError("cannot change the element type");
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  return verifySlices(*this, cast<RankedTensorType>(getX().getType()),
                      cast<RankedTensorType>(getType()), getWorldSize());
}

LogicalResult AllGatherOp::verify() {
  return verifySlices(*this, cast<RankedTensorType>(getType()),
                      cast<RankedTensorType>(getX().getType()), getWorldSize());
}

LogicalResult ShardOp::verify() {
  return verifySlices(*this, cast<RankedTensorType>(getX().getType()),
                      cast<RankedTensorType>(getType()), getWorldSize());
}

LogicalResult TransferOp::verify() {
  if (getFrom() < 0 || getTo() < 0 || getFrom() == getTo())
    return emitOpError("needs two different stages, got ")
           << getFrom() << " and " << getTo();
  return success();
}

LogicalResult AllToAllOp::verify() {
  auto x = cast<RankedTensorType>(getX().getType());
  int64_t ranks = getWorldSize();
  if (ranks < 1)
    return emitOpError("needs at least one rank");
  if (x.getRank() != 1 || x.getDimSize(0) % ranks != 0)
    return emitOpError("x must be 1-D with a multiple of ")
           << ranks << " elements (one block a rank), got " << x;
  return success();
}
