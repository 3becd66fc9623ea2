//===- Checkpoint.cpp - training checkpoints: save, find, resume ----------===//
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/CheckpointIndex.h"
#include "runtime/tooling/CheckpointManifest.h"

#include "runtime/checkpoint/Checksum.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Fnv1a.h"
#include "runtime/core/InputFile.h"
#include "runtime/core/OutputPath.h"
#include "runtime/core/Printable.h"
#include "runtime/tooling/Weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <unistd.h>

namespace dsc::rt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Names of step directories that are not (or no longer) checkpoints: a
// save being written, a checkpoint being replaced by a newer save of its
// step, one being pruned. None of them ever counts as committed.
constexpr const char *kPartial = ".partial";
constexpr const char *kOld = ".old";
constexpr const char *kPruning = ".pruning";

/// Whether `v` is saved whole by the state's lead rank and loaded whole by
/// every rank: a tensor-parallel part, and on a mesh any ZeRO shard. Other
/// shards are saved as pieces by the ranks that hold them.
bool gatheredWhole(const CheckpointRun &run, const NamedTensor &v) {
  return v.tensorSplit() || (v.sharded && run.mesh);
}

/// The state a checkpoint holds: everything but the gradient accumulators,
/// which every step boundary leaves at zero.
bool checkpointed(const NamedTensor &v) {
  return v.kind == StateKind::param || v.kind == StateKind::master ||
         v.kind == StateKind::optState;
}

/// "1 rank", "4 ranks".
std::string ranksText(int ranks) {
  return std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
}

/// The plan identity as the manifest writes it: 16 hex digits.
std::string hex(uint64_t id) { return checksumText(id); }

bool syncDirectory(const std::string &dir, std::string &error) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0 || ::fsync(fd) != 0) {
    error = "cannot sync directory '" + dir + "': " + std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

/// One rank's result, agreed on by all: false on every rank if any failed,
/// so that no rank waits for a commit that will not come.
bool agree(const CheckpointRun &run, bool ok, std::string &error) {
  if (!run.comm || run.worldSize == 1)
    return ok;
  double failed = ok ? 0 : 1, any = 0;
  std::string commError;
  if (!run.comm->allReduceSum(&failed, &any, 1, commError)) {
    error = commError;
    return false;
  }
  if (any > 0 && ok)
    error = "another rank failed to write its part of the checkpoint";
  return any == 0;
}

/// Every rank's file checksum, on every rank (rank 0 writes them into the
/// manifest): each rank hashed its own file as it wrote it.
bool gatherChecksums(const CheckpointRun &run, const FileChecksum &mine,
                     std::vector<FileChecksum> &all, std::string &error) {
  all.assign(size_t(run.worldSize), FileChecksum{});
  if (!run.comm || run.worldSize == 1) {
    all[0] = mine;
    return true;
  }
  std::vector<uint64_t> words(2 * size_t(run.worldSize));
  uint64_t own[2] = {mine.bytes, mine.xxh3};
  if (!run.comm->allGather(own, words.data(), 2, DType::i64, nullptr, error))
    return false;
  for (size_t r = 0; r < all.size(); ++r)
    all[r] = {words[2 * r], words[2 * r + 1]};
  return true;
}

/// Removes a checkpoint directory dsrun made (only the files it writes),
/// then the directory itself.
void removeCheckpointDir(const fs::path &dir) {
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && (name.rfind("rank-", 0) == 0 ||
                                  name.rfind(kCheckpointManifest, 0) == 0))
      fs::remove(e.path(), ec);
  }
  fs::remove(dir, ec); // fails, harmlessly, if something else is in it
}

bool endsWith(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// Why a directory named like a committed checkpoint is not one, "" if it
/// is. A manifest that does not validate still marks a commit: loading it
/// says what is wrong with it, rather than resuming from an older one.
std::string notCommitted(const fs::path &dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / kCheckpointManifest, ec))
    return "no " + std::string(kCheckpointManifest);
  CheckpointManifest m;
  std::string ignored;
  if (!readCheckpointManifest(dir.string(), m, ignored))
    return "";
  for (const ShardRecord &s : m.files)
    if (!fs::exists(dir / s.name, ec))
      return "no " + s.name;
  return "";
}

/// A step directory that is not a checkpoint, and whether dsrun made it
/// (then the next save removes it).
struct Leftover {
  fs::path path;
  std::string why;
  bool ours = false;
};

/// A step directory's name with a suffix: what is left of a save, a
/// replacement or a prune that did not finish.
Leftover leftover(const fs::path &path, const std::string &name) {
  uint64_t step = 0;
  for (const auto &[suffix, why] :
       {std::pair<const char *, const char *>{kPartial, "an interrupted save"},
        {kOld, "a replaced checkpoint not yet removed"},
        {kPruning, "an interrupted --keep prune"}}) {
    if (endsWith(name, suffix) &&
        parseCheckpointStepName(
            name.substr(0, name.size() - std::strlen(suffix)), step))
      return {path, "not committed (" + std::string(why) + ")", true};
  }
  return {path, "not a step-NNNNNNNN name", false};
}

/// Committed checkpoints in `dir` by step, oldest first, and leftovers.
void listCheckpoints(const fs::path &dir,
                     std::vector<std::pair<uint64_t, fs::path>> &committed,
                     std::vector<Leftover> &leftovers, std::error_code &ec) {
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    std::error_code typeError;
    if (name.rfind("step-", 0) != 0 || !e.is_directory(typeError))
      continue;
    uint64_t step = 0;
    if (!parseCheckpointStepName(name, step)) {
      leftovers.push_back(leftover(e.path(), name));
      continue;
    }
    std::string why = notCommitted(e.path());
    if (why.empty())
      committed.push_back({step, e.path()});
    else
      leftovers.push_back({e.path(), "not committed (" + why + ")", true});
  }
  std::sort(committed.begin(), committed.end());
}

/// Puts the whole `partial` directory in place as `final`: the rename is
/// the commit. A checkpoint already at `final` (its step saved again) is
/// renamed aside first and removed once the new one is in place.
bool commitStep(const fs::path &dir, const fs::path &partial,
                const fs::path &final, std::string &error) {
  std::error_code ec;
  const fs::path old = final.string() + kOld;
  bool replaced = fs::exists(final, ec);
  if (replaced) {
    if (fs::exists(old, ec))
      removeCheckpointDir(old); // from a save killed while replacing
    fs::rename(final, old, ec);
  }
  if (!ec)
    fs::rename(partial, final, ec);
  if (ec) {
    error = "cannot commit '" + final.string() + "': " + ec.message();
    return false;
  }
  if (!syncDirectory(dir.string(), error))
    return false;
  if (replaced)
    removeCheckpointDir(old);
  return true;
}

/// --keep: all but the newest `keep` committed checkpoints (never the one
/// just committed) leave the committed namespace by a rename to
/// step-N.pruning, synced, and only then are deleted. A kill at any moment
/// leaves each one whole under its own name, or a .pruning leftover that
/// resuming ignores and the next save removes: never a step-N with a
/// manifest and part of its files.
void pruneCheckpoints(const fs::path &dir, uint64_t keep,
                      const fs::path &justCommitted) {
  std::vector<std::pair<uint64_t, fs::path>> committed;
  std::vector<Leftover> leftovers;
  std::error_code ec;
  listCheckpoints(dir, committed, leftovers, ec);
  std::vector<fs::path> doomed;
  for (size_t i = 0; !ec && i + keep < committed.size(); ++i) {
    const fs::path &step = committed[i].second;
    if (step.filename() == justCommitted.filename())
      continue;
    fs::path trash = step.string() + kPruning;
    if (fs::exists(trash, ec))
      removeCheckpointDir(trash);
    fs::rename(step, trash, ec);
    if (!ec)
      doomed.push_back(trash);
  }
  std::string ignored; // pruning is best effort: the save has committed
  if (!doomed.empty() && syncDirectory(dir.string(), ignored))
    for (const fs::path &trash : doomed)
      removeCheckpointDir(trash);
}

/// What earlier, interrupted saves and prunes left (dsrun's own names
/// only; anything else in the directory stays). Safe once this save has
/// committed: every rank has finished writing, and no leftover is ever
/// resumed from.
void removeLeftovers(const fs::path &dir) {
  std::vector<std::pair<uint64_t, fs::path>> committed;
  std::vector<Leftover> leftovers;
  std::error_code ec;
  listCheckpoints(dir, committed, leftovers, ec);
  for (const Leftover &l : leftovers)
    if (l.ours)
      removeCheckpointDir(l.path);
}

} // namespace

uint64_t planIdentity(const std::vector<uint8_t> &bytes) {
  return fnv1a64(bytes.data(), bytes.size());
}

namespace {

/// Where a rank file's tensor comes from: `count` floats gathered already
/// (`gathered`), or elements [first, first + count) of a variable's local
/// buffer, read a chunk at a time.
struct StreamedPart {
  const NamedTensor *variable;
  int64_t first, count;
  const float *gathered = nullptr;
};

/// Writes `tensors` to `path` (committed in place), each from its source in
/// `sources`, through one chunk-sized buffer; `sum` gets the file's
/// checksum.
bool writeRankFile(Session &session, const std::string &path,
                   const std::vector<TensorToSave> &tensors,
                   const std::vector<StreamedPart> &sources,
                   const std::map<std::string, std::string> &metadata,
                   FileChecksum &sum, std::string &error) {
  constexpr int64_t kChunkFloats = int64_t(1) << 22; // 16 MiB
  SafetensorsWriter writer;
  if (!writer.open(path, tensors, metadata, error))
    return false;
  std::vector<float> chunk;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const StreamedPart &s = sources[i];
    if (s.gathered) {
      if (!writer.write(s.gathered, uint64_t(s.count), error))
        return false;
      continue;
    }
    // At least one write, so that an empty tensor is passed too.
    for (int64_t done = 0; done == 0 || done < s.count; done += kChunkFloats) {
      const int64_t n = std::min(kChunkFloats, s.count - done);
      chunk.resize(size_t(n));
      if (!session.readFloats(*s.variable, s.first + done, chunk.data(), n,
                              error) ||
          !writer.write(chunk.data(), uint64_t(n), error))
        return false;
    }
  }
  sum = writer.written();
  return writer.commit(error);
}

} // namespace

bool saveCheckpoint(const CheckpointRun &run, const std::string &dir,
                    const RunState &state, uint64_t keep, std::string &path,
                    std::string &error, const std::string &clientState) {
  const fs::path final = fs::path(dir) / checkpointStepName(state.step);
  const fs::path partial = final.string() + kPartial;
  bool ok = true;
  std::error_code ec;
  if (run.rank == 0) {
    fs::create_directories(dir, ec);
    if (!ec && fs::exists(partial))
      removeCheckpointDir(partial); // an earlier, interrupted save
    if (!ec)
      fs::create_directory(partial, ec);
    if (ec) {
      error = "cannot create '" + partial.string() + "': " + ec.message();
      ok = false;
    }
  }
  if (!agree(run, ok, error))
    return false;

  // This rank's part of every checkpointed variable: gathered ones whole
  // here (a collective, before the file is opened), the rest streamed from
  // the session a chunk at a time (a rank holds one chunk of its state
  // beside its arenas, not a copy of the state).
  std::list<std::vector<float>> gathered; // stable addresses
  std::vector<TensorToSave> tensors;
  std::vector<StreamedPart> sources; // per tensor
  json shapes = json::object();
  for (const NamedTensor &v : run.session->variables()) {
    // A lower stage writes what it shares with this one (every rank of
    // the stage skips it alike, so its collectives stay matched).
    if (!checkpointed(v) || run.heldEarlier.count(v.name))
      continue;
    shapes[v.name] = v.shape;
    if (gatheredWhole(run, v)) {
      // Gathered whole on every rank (a collective) and written by rank 0
      // under its name, as one rank would: resumable at any group size.
      std::vector<float> &whole = gathered.emplace_back(size_t(v.numel()));
      if (!run.session->readVariable(v, whole.data(), error)) {
        ok = false;
        break;
      }
      if (run.leadsState) {
        tensors.push_back({v.name, v.shape, nullptr});
        sources.push_back({&v, 0, v.numel(), whole.data()});
      } else {
        gathered.pop_back();
      }
      continue;
    }
    VariablePart part = v.partOn(run.shardRank);
    if (part.empty() || (!v.sharded && !run.leadsState))
      continue; // nothing here, or the lead writes what every rank holds
    const int64_t count = part.end - part.begin;
    if (v.sharded)
      tensors.push_back(
          {v.name + "@" + std::to_string(part.begin), {count}, nullptr});
    else
      tensors.push_back({v.name, v.shape, nullptr});
    sources.push_back({&v, part.local, count});
  }
  // The file records its step, so that one copied into another checkpoint
  // is named as such, not only as a checksum mismatch.
  FileChecksum mine;
  if (ok)
    ok = writeRankFile(
        *run.session,
        (partial / checkpointRankFile(run.rank, run.worldSize)).string(),
        tensors, sources,
        {{"format", kCheckpointFormat},
         {"shapes", shapes.dump()},
         {"step", std::to_string(state.step)}},
        mine, error);
  std::vector<FileChecksum> sums;
  if (!agree(run, ok, error) || !gatherChecksums(run, mine, sums, error))
    return false;

  // The commit: the manifest, then the directory's rename; then --keep's
  // pruning and what earlier interrupted saves left.
  if (run.rank == 0) {
    CheckpointManifest m;
    m.state = state;
    m.seed = run.seed;
    m.worldSize = run.worldSize;
    m.model = run.model;
    m.plan = hex(run.planId);
    for (int r = 0; r < run.worldSize; ++r)
      m.files.push_back({checkpointRankFile(r, run.worldSize), sums[r]});
    std::string text = manifestText(m);
    ok = (clientState.empty() ||
          writeOutput((partial / kClientStateFile).string(), clientState.data(),
                      clientState.size(), error)) &&
         writeOutput((partial / kCheckpointManifest).string(), text.data(),
                     text.size(), error) &&
         syncDirectory(partial.string(), error) &&
         commitStep(dir, partial, final, error);
    if (ok && keep > 0)
      pruneCheckpoints(dir, keep, final);
    if (ok)
      removeLeftovers(dir);
  }
  if (!agree(run, ok, error))
    return false;
  path = final.string();
  return true;
}

bool findLatestCheckpoint(const std::string &dir, std::string &path,
                          std::vector<std::string> &notes, std::string &error) {
  path.clear();
  std::error_code ec;
  if (!fs::exists(dir, ec))
    return true;
  if (!fs::is_directory(dir, ec)) {
    error = "--save-dir '" + dir + "' is not a directory";
    return false;
  }
  std::vector<std::pair<uint64_t, fs::path>> committed;
  std::vector<Leftover> leftovers;
  listCheckpoints(dir, committed, leftovers, ec);
  if (ec) {
    error = "cannot read '" + dir + "': " + ec.message();
    return false;
  }
  std::sort(
      leftovers.begin(), leftovers.end(),
      [](const Leftover &a, const Leftover &b) { return a.path < b.path; });
  for (const Leftover &l : leftovers)
    notes.push_back("ignoring '" + printable(l.path.string(), 4096) +
                    "': " + l.why);
  if (!committed.empty())
    path = committed.back().second.string();
  return true;
}

bool resumedSeed(const std::string &dir, bool given, uint64_t &seed,
                 std::string &error) {
  std::string path;
  std::vector<std::string> notes; // resuming prints them
  CheckpointManifest manifest;
  if (!findLatestCheckpoint(dir, path, notes, error))
    return false;
  if (path.empty())
    return true;
  if (!readCheckpointManifest(path, manifest, error))
    return false;
  if (given && seed != manifest.seed) {
    error = "--seed " + std::to_string(seed) + ": the checkpoint in " + path +
            " was trained with --seed " + std::to_string(manifest.seed) +
            "; resume continues its seed (omit --seed)";
    return false;
  }
  seed = manifest.seed;
  return true;
}

bool loadCheckpoint(const CheckpointRun &run, const std::string &path,
                    RunState &state, std::vector<std::string> &notes,
                    std::string &error) {
  CheckpointIndex index;
  if (!index.open(path, error, run.rank, run.worldSize))
    return false;
  state = index.state();
  if (index.model() != run.model)
    notes.push_back("checkpoint '" + path + "' is of model '" + index.model() +
                    "', the plan's is '" + run.model + "'");
  if (index.planId() != hex(run.planId) || index.worldSize() != run.worldSize)
    notes.push_back("resuming '" + path + "' (" + ranksText(index.worldSize()) +
                    ") into another plan (" + ranksText(run.worldSize) + ")");

  // The plan and the checkpoint must hold the same state.
  const auto &shapes = index.shapes();
  std::vector<std::string> problems;
  std::map<std::string, const NamedTensor *> wanted;
  for (const NamedTensor &v : run.session->variables())
    if (checkpointed(v)) {
      wanted[v.name] = &v;
      auto it = shapes.find(v.name);
      if (it == shapes.end())
        problems.push_back("the checkpoint has no '" + v.name + "'");
      else if (it->second != v.shape)
        problems.push_back("'" + v.name + "' is " + formatShape(it->second) +
                           " in the checkpoint and " + formatShape(v.shape) +
                           " in the plan");
    }
  // A pipeline stage holds part of the model: the others check theirs.
  for (const auto &[name, shape] : shapes)
    if (run.pipelineState.empty() ? !wanted.count(name)
                                  : !run.pipelineState.count(name))
      problems.push_back("the plan has no '" + printable(name) +
                         "', which the checkpoint holds");
  if (!problems.empty()) {
    error = path + ": " + problems.front() +
            (problems.size() > 1
                 ? " (and " + std::to_string(problems.size() - 1) + " more)"
                 : "");
    return false;
  }

  // Each variable: only the elements this rank holds are read.
  for (const NamedTensor &v : run.session->variables()) {
    if (!checkpointed(v))
      continue;
    // A tensor-parallel part (or any shard on a mesh) is read whole;
    // writeVariable takes what this rank holds.
    VariablePart part = gatheredWhole(run, v) ? VariablePart{0, v.numel(), 0}
                                              : v.partOn(run.shardRank);
    if (part.empty())
      continue;
    std::vector<float> whole(size_t(v.numel()), 0.0f);
    if (!index.read(v.name, part.begin, part.end, whole.data() + part.begin,
                    error))
      return false;
    run.session->writeVariable(v, whole.data());
  }
  return true;
}

} // namespace dsc::rt
