//===- Weights.h - parameters in and out as safetensors ---------*- C++ -*-===//
//
// --export-weights and --init-from: every parameter variable under its plan
// name (nanoGPT / Hugging Face state-dict names). A model that ties two
// names to one parameter (nanoGPT's GPT: lm_head.weight and
// transformer.wte.weight) has both keys in its state_dict, so the weights
// are written under both and accepted under both on the way in.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_WEIGHTS_H
#define DSC_RUNTIME_TOOLING_WEIGHTS_H

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/exec/Session.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

class CheckpointIndex;

/// Which variables are parameters, and the other names some of them have.
struct WeightsLayout {
  std::vector<std::string> params;
  /// (alias, parameter): a state-dict name that shares a parameter's
  /// values (tied weights), written right after it.
  std::vector<std::pair<std::string, std::string>> aliases;

  /// The layout of a plan for `model` with these parameters and the plan's
  /// own aliases (Plan.aliases: an exported PyTorch module's tied names);
  /// gpt2 plans without their own lm_head.weight tie it to the token
  /// embedding.
  static WeightsLayout
  forModel(const std::string &model, std::vector<std::string> params,
           std::vector<std::pair<std::string, std::string>> aliases = {});

  /// The aliases of `param`, in order.
  std::vector<std::string> aliasesOf(const std::string &param) const;
};

/// Writes the parameters to `path` (via path.tmp) if `write`. `metadata`
/// goes into the header next to {"format": "pt"}. Gathering a sharded
/// parameter is a collective (Session::readVariable), so every rank calls
/// this, in step, and one of them (rank 0) writes. False + one line on
/// error.
bool exportWeights(Session &session, const WeightsLayout &layout,
                   const std::string &path,
                   std::map<std::string, std::string> metadata, bool write,
                   std::string &error);

/// Parameter `name` whole, as exportWeights writes it (its fp32 master
/// under mixed precision; a sharded one gathered, so every rank calls it in
/// step).
bool readWholeParam(Session &session, const std::string &name,
                    std::vector<float> &whole, std::vector<int64_t> &shape,
                    std::string &error);
/// False + "the trained parameter 'NAME' holds N non-finite values (...);
/// not exporting PATH" if `whole` has one.
bool checkFiniteParam(const std::vector<float> &whole, const std::string &name,
                      const std::string &path, std::string &error);

/// Writes `tensors` as a weights file (safetensors with {"format": "pt"}
/// beside `metadata`, via path.tmp).
bool saveWeightsFile(const std::string &path,
                     const std::vector<TensorToSave> &tensors,
                     std::map<std::string, std::string> metadata,
                     std::string &error);

/// The same file as exportWeights would write after loading `checkpoint`,
/// but from the checkpoint alone and streamed: one variable in memory at a
/// time (the rank files are mapped), no session, no optimizer state, from a
/// checkpoint of any world size or ZeRO stage. Each parameter's fp32
/// master where the checkpoint has one. False + one line on error.
bool exportCheckpointWeights(const CheckpointIndex &checkpoint,
                             const WeightsLayout &layout,
                             const std::string &path,
                             std::map<std::string, std::string> metadata,
                             std::string &error);

/// The floats of the buffer `v` views on this rank (a sharded variable's:
/// the rank's whole group shard), converted exactly from 16 bits. Local;
/// false + one line for a buffer that is not floating-point.
bool readLocalFloats(Session &session, const NamedTensor &v,
                     std::vector<float> &out, std::string &error);

/// Debugging (--dump-state): writes every variable the rank holds, whose
/// ZeRO shards are part `shardRank` of their groups (its place among the
/// data-parallel replicas), (parameters, masters, moments, accumulators:
/// what it stores, not
/// gathered), as F32, to `path`: a variable it holds whole under its plan
/// name, its part of a sharded one as NAME@FIRST (the part's first element
/// in the whole variable). 16-bit values convert exactly. Local; false + one
/// line on error.
bool dumpState(Session &session, int shardRank, const std::string &path,
               std::string &error);

/// Loads every parameter from `path` after checking the whole file against
/// the layout: a missing parameter, a shape or dtype mismatch or a tensor
/// that is not a parameter is one line (the first problem and how many more)
/// and nothing is loaded. Shapes are the whole parameters' (sharded ones
/// too); each rank takes the part it holds. A pipeline stage loads its
/// parameters (`layout`) and checks the file against the whole model's
/// (`model`; null: `layout` is the model's).
bool importWeights(Session &session, const WeightsLayout &layout,
                   const std::string &path, std::string &error,
                   const WeightsLayout *model = nullptr);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_WEIGHTS_H
