//===- PipelineWeights.cpp - a pipeline's weights in one file -------------===//
//
// Each stage of a pipeline holds only its blocks' parameters (and a tied
// one, GPT-2's token embedding, on the first and last stage). To write
// one weights file as one rank would, each stage of the first data-
// parallel replica in turn broadcasts its parameters over the world from
// its first rank (rank s x T, with tensor groups of T ranks; the group
// gathers each tensor-parallel parameter first): the count, then per
// parameter its name, its shape and its values; rank 0 keeps each name
// the first time it comes (a tied parameter's copies are equal after
// every step) and writes the file. Broadcasts are collectives, so every
// rank runs the same sequence.
//
//===----------------------------------------------------------------------===//
#include "runtime/tooling/PipelineWeights.h"

#include "runtime/comm/Communicator.h"

#include <list>
#include <set>

namespace dsc::rt {
namespace {

/// Broadcasts `n` int64 values from `root` (in place).
bool shareInts(Communicator &comm, std::vector<int64_t> &v, int root,
               std::string &error) {
  return comm.broadcast(v.data(), v.size(), DType::i64, root, nullptr, error);
}

/// Stage `s`'s parameters, from `root` (its first rank in the first
/// replica) to every rank; a rank that `keep`s them adds those not seen
/// yet to `tensors`
/// (their values in `held`). Every rank of that stage reads each parameter
/// too: a ZeRO-sharded one (an fp32 master) is gathered over the stage's
/// data group, a tensor-parallel one over its tensor group.
bool shareStage(Session &session, const WeightsLayout &layout,
                Communicator &comm, int stages, int tensorParallel, int s,
                const std::string &path, bool keep, std::set<std::string> &seen,
                std::list<std::vector<float>> &held,
                std::vector<TensorToSave> &tensors, std::string &error) {
  const int root = s * tensorParallel;
  const bool mine = comm.rank() == root;
  const bool stage = comm.rank() / tensorParallel % stages == s;
  std::vector<int64_t> count{mine ? int64_t(layout.params.size()) : 0};
  if (!shareInts(comm, count, root, error))
    return false;
  for (int64_t i = 0; i < count[0]; ++i) {
    std::string name = stage ? layout.params[size_t(i)] : "";
    std::vector<float> whole;
    std::vector<int64_t> shape;
    if (stage && (!readWholeParam(session, name, whole, shape, error) ||
                  !checkFiniteParam(whole, name, path, error)))
      return false;
    std::vector<int64_t> header{int64_t(name.size()), int64_t(shape.size())};
    if (!shareInts(comm, header, root, error))
      return false;
    std::vector<int64_t> chars(static_cast<size_t>(header[0]));
    std::vector<int64_t> dims(static_cast<size_t>(header[1]));
    for (size_t c = 0; mine && c < name.size(); ++c)
      chars[c] = static_cast<unsigned char>(name[c]);
    if (mine)
      dims = shape;
    if (!shareInts(comm, chars, root, error) ||
        !shareInts(comm, dims, root, error))
      return false;
    int64_t numel = 1;
    for (int64_t d : dims)
      numel *= d;
    whole.resize(size_t(numel));
    if (!comm.broadcast(whole.data(), whole.size(), DType::f32, root, nullptr,
                        error))
      return false;
    if (!keep)
      continue;
    name.assign(chars.begin(), chars.end());
    if (!seen.insert(name).second)
      continue; // a tied parameter an earlier stage gave
    held.push_back(std::move(whole));
    tensors.push_back({name, dims, held.back().data()});
    for (const std::string &alias : layout.aliasesOf(name))
      tensors.push_back({alias, dims, held.back().data()});
  }
  return true;
}

} // namespace

bool exportPipelineWeights(Session &session, const WeightsLayout &layout,
                           Communicator &comm, int stages, int tensorParallel,
                           const std::string &path,
                           std::map<std::string, std::string> metadata,
                           std::string &error, bool everyRank) {
  std::set<std::string> seen;
  std::list<std::vector<float>> held; // stable addresses
  std::vector<TensorToSave> tensors;
  const bool keep = everyRank || comm.rank() == 0;
  for (int s = 0; s < stages; ++s)
    if (!shareStage(session, layout, comm, stages, tensorParallel, s, path,
                    keep, seen, held, tensors, error))
      return false;
  if (!keep)
    return true;
  return saveWeightsFile(path, tensors, std::move(metadata), error);
}

} // namespace dsc::rt
