//===- BlockNames.h - which transformer block a parameter belongs to ------===//
//
// A model's repeated blocks show in its parameters' names, as PyTorch's
// state dicts write them: "transformer.h.3.attn.c_attn.weight",
// "model.layers.3.mlp.up_proj.weight". ds-remat's layers policy and
// ds-pipeline-cut find the blocks this way, whatever built the graph.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_BLOCKNAMES_H
#define DSC_PASSES_BLOCKNAMES_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace mlir::ds {

/// "transformer.h.3.attn.c_attn.weight" -> ("transformer.h.", 3): the name
/// up to its first numbered component, and the number. None for a name
/// without one (embeddings, the final norm).
std::optional<std::pair<std::string, int64_t>> blockOf(llvm::StringRef name);

} // namespace mlir::ds

#endif // DSC_PASSES_BLOCKNAMES_H
