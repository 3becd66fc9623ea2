//===- PlanFormat.h - plan file facts shared with the compiler -*- C++ -*-===//
//
// What the plan emitter (compiler) and the loader (runtime) must agree on
// beyond what plan.fbs says: the schema version, the required program names,
// the RNG step reserved for initializers, and the words used for the schema's
// enums in reports, metrics and errors. Header-only, no LLVM/MLIR.
//
// The loader rejects a plan (one error line) unless:
//  - schema_version == kSchemaVersion, world_size >= 1,
//    accumulation_steps >= 1, and every enum field holds a schema value;
//  - each buffer lies in its arena: offset + numel * dtypeSize <= arena
//    bytes, offset a multiple of dtypeSize (arenas start 64-byte aligned, so
//    64-byte offsets give vector-aligned tensors), no dimension negative,
//    no size above kMaxBytes;
//  - every buffer id (instruction operands, program inputs and outputs,
//    variables, constants) is in range; variable and program names are
//    unique; programs micro_step and apply exist;
//  - each constant's data is the buffer's bytes (little-endian) or exactly
//    one element (a splat);
//  - each instruction names a kernel of the backend's table with its arity
//    (inputs, outputs, int and float attributes; -1 in KernelInfo = any),
//    and the backend has a variant of it for the operands' dtypes;
//  - each instruction is placed in a space the backend runs (Instr.space),
//    and every operand lies in an arena that space reaches;
//  - events: ids < num_events (<= kMaxEvents); each recorded at most once per
//    program; each wait comes after, in instruction order, the instruction
//    that records it (so instruction order is one valid total order);
//  - streams synchronize only through events (the runtime infers nothing
//    from buffers): two instructions on different streams whose operands
//    overlap in an arena, one of them writing, must be ordered by a chain of
//    events. Events do not outlive a run; run() returns only after every
//    stream has finished, so programs need no events between them.
//  - constants are filled once, when the Session is created: no instruction
//    output overlaps a constant's buffer.
//  - a sharded variable (ZeRO stage 3) is f32; its buffer (this rank's
//    shard, S elements) is 1-D; its `shape` is present, with no negative
//    dimension and at least one element; its group (world_size x S
//    elements) is at most kMaxBytes elements; and shard_offset +
//    numel(shape) <= world_size x S.
// Semantics the emitter must respect and the loader cannot check:
//  - a normal initializer draws element i of the variable's logical tensor
//    (index from 0). A variable that is not sharded holds its whole tensor
//    in its buffer, element i at index i; a sharded one holds element i on
//    rank (shard_offset + i) / S at index (shard_offset + i) % S, so the
//    draws do not depend on the world size. Initializers write only their
//    own elements: the other members of a group and its padding are left
//    alone (zero, as arenas start).
//  - the runtime's measured bytes per arena are the highest end (offset +
//    bytes) of any buffer written: constants and variables (resident from
//    the start), a program's inputs and every instruction output. For
//    predicted == measured, an arena's bytes end at the end of its last
//    written buffer (no rounding up).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_PLAN_PLANFORMAT_H
#define DSC_RUNTIME_PLAN_PLANFORMAT_H

#include "runtime/core/DType.h"
#include "runtime/core/MemorySpace.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/schema/plan_generated.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dsc::plan {

/// Plan.schema_version this runtime reads. Bump on any schema or semantic
/// change that an older dsrun would misread.
/// 3: Instr.space (where an instruction runs); kernels selected by dtypes.
/// 4: mixed precision: VarKind.master, Plan.loss_scale, skips_overflow.
/// 5: Plan.checksum, verified on load.
/// 6: tensor parallelism (Plan.tensor_parallel, Variable.tensor_split_*,
///    Instr.tensor_group).
/// 7: Program.arena_peaks; ds.embedding and ds.embedding_grad take an int
///    attribute (parts: vocabulary parallelism).
/// 8: Plan.sequence_parallel (Ulysses); dist.shard of integer tensors.
/// 9: pipeline parallelism (Plan.pipeline_parallel, pipeline_stage,
///    pipeline_groups, stages, model_parameters; Instr.pipeline_group;
///    comm.send, comm.recv).
constexpr uint32_t kSchemaVersion = 9;

/// FlatBuffers file identifier and extension (also in plan.fbs).
constexpr std::string_view kFileIdentifier = "DSPL";
constexpr std::string_view kFileExtension = "dsplan";

/// The Philox `step` word of initializer draws: variable element i of a
/// normal initializer is rng::normalAt(seed, rng_stream, kInitRngStep, i) *
/// std, the same draw as dsc::ref::init, so no training step collides.
constexpr uint32_t kInitRngStep = 0xFFFFFFFFu;

/// Largest byte size the loader accepts for an arena or a buffer (2^56), so
/// that offset + size arithmetic can never overflow.
constexpr uint64_t kMaxBytes = uint64_t(1) << 56;

/// Largest Program.num_events the loader accepts.
constexpr uint32_t kMaxEvents = uint32_t(1) << 20;

// Enum range checks: the FlatBuffers verifier checks structure, not enum
// values, so a corrupt plan can hold any byte in an enum field.
inline bool isValid(DType t) { return t >= DType::MIN && t <= DType::MAX; }
inline bool isValid(Space s) { return s >= Space::MIN && s <= Space::MAX; }
inline bool isValid(Category c) {
  return c >= Category::MIN && c <= Category::MAX;
}
inline bool isValid(Stream s) { return s >= Stream::MIN && s <= Stream::MAX; }
inline bool isValid(VarKind k) {
  return k >= VarKind::MIN && k <= VarKind::MAX;
}
inline bool isValid(InitKind k) {
  return k >= InitKind::MIN && k <= InitKind::MAX;
}

/// The schema's Space and dsc::MemorySpace (runtime/core/MemorySpace.h)
/// are one enum written twice, value for value; the compiler and the
/// runtime convert between them here only.
static_assert(uint8_t(Space::device) == uint8_t(dsc::MemorySpace::device) &&
                  uint8_t(Space::host) == uint8_t(dsc::MemorySpace::host) &&
                  Space::MAX == Space::host,
              "plan.fbs's Space and dsc::MemorySpace must agree");
constexpr dsc::MemorySpace memorySpace(Space s) {
  return dsc::MemorySpace(static_cast<uint8_t>(s));
}
constexpr Space schemaSpace(dsc::MemorySpace s) {
  return Space(static_cast<uint8_t>(s));
}

/// Bytes per element; 0 for a value outside the enum. The schema's DType
/// has dsc::DType's values (runtime/core/DType.h).
constexpr size_t dtypeSize(DType t) {
  return dsc::dtypeSize(dsc::DType(static_cast<uint8_t>(t)));
}

// Names as written in plan.fbs; "?" for a value outside the enum.
namespace detail {
inline const char *orUnknown(const char *name) {
  return name && *name ? name : "?";
}
} // namespace detail
inline const char *dtypeName(DType t) {
  return detail::orUnknown(isValid(t) ? EnumNameDType(t) : nullptr);
}
inline const char *spaceName(Space s) {
  return detail::orUnknown(isValid(s) ? EnumNameSpace(s) : nullptr);
}
inline const char *categoryName(Category c) {
  return detail::orUnknown(isValid(c) ? EnumNameCategory(c) : nullptr);
}
inline const char *streamName(Stream s) {
  return detail::orUnknown(isValid(s) ? EnumNameStream(s) : nullptr);
}
inline const char *varKindName(VarKind k) {
  return detail::orUnknown(isValid(k) ? EnumNameVarKind(k) : nullptr);
}
inline const char *initKindName(InitKind k) {
  return detail::orUnknown(isValid(k) ? EnumNameInitKind(k) : nullptr);
}

/// The inverse of the names above, for ds_config.json and command lines.
template <typename E, size_t N>
std::optional<E> parseEnum(std::string_view name, const E (&values)[N],
                           const char *(*nameOf)(E)) {
  for (E v : values)
    if (name == nameOf(v))
      return v;
  return std::nullopt;
}
inline std::optional<DType> parseDType(std::string_view name) {
  return parseEnum(name, EnumValuesDType(), dtypeName);
}
inline std::optional<Space> parseSpace(std::string_view name) {
  return parseEnum(name, EnumValuesSpace(), spaceName);
}
inline std::optional<Category> parseCategory(std::string_view name) {
  return parseEnum(name, EnumValuesCategory(), categoryName);
}
inline std::optional<Stream> parseStream(std::string_view name) {
  return parseEnum(name, EnumValuesStream(), streamName);
}

} // namespace dsc::plan

#endif // DSC_RUNTIME_PLAN_PLANFORMAT_H
