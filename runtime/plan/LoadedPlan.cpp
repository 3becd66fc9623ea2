//===- LoadedPlan.cpp - read and verify a plan file ---------------------===//
//
// A plan is checked in four layers before anything reads it: the file
// identifier, the FlatBuffers verifier (every offset and vector inside the
// bytes), the checksum (runtime/plan/PlanChecksum.h: a changed value), then
// the semantic checks below (enum values, buffers inside their
// arenas, kernels known with the right arity, collectives on the comm
// stream, events recorded before they are waited on). Each failure is one
// line naming the file and the thing.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/LoadedPlan.h"

#include "runtime/backends/Backend.h"
#include "runtime/core/InputFile.h"
#include "runtime/core/Printable.h"
#include "runtime/plan/PlanChecksum.h"
#include "runtime/plan/PlanFormat.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace dsc::rt {
namespace {

using namespace dsc::plan;

std::string hex16(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(v));
  return text;
}

template <typename... Ts> std::string cat(const Ts &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

/// Bytes from the plan, printable on one line: a corrupt plan may hold any
/// bytes in its strings.
std::string quote(const flatbuffers::String *s) {
  return "'" + (s ? printable(s->string_view()) : std::string()) + "'";
}

const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

std::string shapeString(const flatbuffers::Vector<int64_t> *shape) {
  std::string s = "[";
  if (shape)
    for (flatbuffers::uoffset_t i = 0; i < shape->size(); ++i)
      s += (i ? "," : "") + std::to_string(shape->Get(i));
  return s + "]";
}

template <typename T> flatbuffers::uoffset_t count(const T *vec) {
  return vec ? vec->size() : 0;
}

/// The verifier checks the alignment of a vector's length word, not of its
/// 8-byte elements; a corrupt plan can misplace them, and reading them would
/// be undefined. (The builder does not align empty vectors.)
template <typename T> bool aligned(const flatbuffers::Vector<T> *vec) {
  return !vec || vec->size() == 0 ||
         reinterpret_cast<uintptr_t>(vec->data()) % alignof(T) == 0;
}

std::vector<uint32_t> ids(const flatbuffers::Vector<uint32_t> *vec) {
  return vec ? std::vector<uint32_t>(vec->begin(), vec->end())
             : std::vector<uint32_t>();
}

std::vector<int64_t> dims(const Buffer *b) {
  return b->shape()
             ? std::vector<int64_t>(b->shape()->begin(), b->shape()->end())
             : std::vector<int64_t>();
}

class Checker {
public:
  Checker(const Plan &plan, const Backend &backend, std::string &error)
      : plan_(plan), backend_(backend), error_(error) {}

  bool check() {
    if (plan_.schema_version() != kSchemaVersion)
      return fail(cat("schema version ", plan_.schema_version(),
                      ", this dsrun reads ", kSchemaVersion,
                      " (compile the plan again with the dsc of this build)"));
    if (plan_.world_size() < 1)
      return fail("world size 0; a plan runs on at least 1 rank");
    if (plan_.tensor_parallel() < 1 ||
        plan_.world_size() % plan_.tensor_parallel() != 0)
      return fail(cat("tensor_parallel ", plan_.tensor_parallel(),
                      " does not divide world size ", plan_.world_size()));
    if (plan_.sequence_parallel() < 1 ||
        plan_.world_size() % plan_.sequence_parallel() != 0 ||
        plan_.seq_len() % plan_.sequence_parallel() != 0)
      return fail(cat("sequence_parallel ", plan_.sequence_parallel(),
                      " does not divide world size ", plan_.world_size(),
                      " and seq_len ", plan_.seq_len()));
    if (plan_.sequence_parallel() > 1 && plan_.tensor_parallel() > 1)
      return fail("sequence_parallel and tensor_parallel are both above 1");
    if (plan_.stages())
      return checkPipelineFile();
    if (plan_.pipeline_parallel() < 1 || plan_.pipeline_parallel() > 64 ||
        plan_.pipeline_stage() >= plan_.pipeline_parallel())
      return fail(cat("pipeline stage ", plan_.pipeline_stage(), " of ",
                      plan_.pipeline_parallel(),
                      " stages (1 to 64 stages, numbered from 0)"));
    if (plan_.accumulation_steps() < 1)
      return fail("accumulation_steps 0; a step runs micro_step at least "
                  "once");
    return checkArenas() && checkBuffers() && checkVariables() &&
           checkConstants() && checkPrograms();
  }

private:
  /// The file of a pipeline: a plan per stage and nothing else; each stage's
  /// plan is checked when a rank loads it (LoadedPlan::stage).
  bool checkPipelineFile() {
    const uint32_t n = count(plan_.stages());
    if (plan_.pipeline_parallel() < 2 || plan_.pipeline_parallel() > 64 ||
        n != plan_.pipeline_parallel())
      return fail(cat("a pipeline file of ", n, " stage plan", plural(n),
                      " for pipeline_parallel ", plan_.pipeline_parallel(),
                      " (2 to 64 stages, a plan each)"));
    const uint32_t tp = plan_.tensor_parallel();
    if (plan_.world_size() % (n * tp) != 0)
      return fail(cat(n, " pipeline stages",
                      tp > 1 ? cat(" x ", tp, "-way tensor groups") : "",
                      " do not divide world size ", plan_.world_size()));
    if (count(plan_.programs()) || count(plan_.arenas()) ||
        count(plan_.variables()))
      return fail("a pipeline file holds programs, arenas or variables "
                  "beside its stages' plans");
    for (uint32_t s = 0; s < n; ++s)
      if (!plan_.stages()->Get(s)->plan())
        return fail(cat("pipeline stage ", s, " has no plan"));
    return true;
  }

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  std::string bufferName(uint32_t id) {
    return cat("buffer ", id, " (", quote(plan_.buffers()->Get(id)->name()),
               ")");
  }

  /// `id` names a buffer of the plan; `what` says who refers to it.
  bool checkBufferId(uint32_t id, const std::string &what) {
    uint32_t n = count(plan_.buffers());
    if (id < n)
      return true;
    return fail(cat(what, " is buffer ", id, "; the plan has ", n, " buffer",
                    plural(n)));
  }

  bool checkArenas() {
    uint32_t n = count(plan_.arenas());
    for (uint32_t i = 0; i < n; ++i) {
      const Arena *a = plan_.arenas()->Get(i);
      if (!isValid(a->space()))
        return fail(cat("arena ", i, " has unknown space ", int(a->space())));
      if (!isValid(a->category()))
        return fail(
            cat("arena ", i, " has unknown category ", int(a->category())));
      if (a->bytes() > kMaxBytes)
        return fail(cat("arena ", i, " (", categoryName(a->category()),
                        ") has ", a->bytes(), " bytes, more than the limit ",
                        kMaxBytes));
    }
    return true;
  }

  bool checkBuffers() {
    uint32_t numArenas = count(plan_.arenas());
    uint32_t n = count(plan_.buffers());
    for (uint32_t i = 0; i < n; ++i) {
      const Buffer *b = plan_.buffers()->Get(i);
      if (b->arena() >= numArenas)
        return fail(cat(bufferName(i), " is in arena ", b->arena(),
                        "; the plan has ", numArenas, " arena",
                        plural(numArenas)));
      if (!isValid(b->dtype()))
        return fail(cat(bufferName(i), " has unknown dtype ", int(b->dtype())));
      if (!aligned(b->shape()))
        return fail(
            cat(bufferName(i), " has a misaligned shape (corrupt plan)"));
      // Count elements without overflow: every partial product stays below
      // kMaxBytes, so the next multiplication cannot wrap.
      uint64_t bytes = plan::dtypeSize(b->dtype());
      for (int64_t d : dims(b)) {
        if (d < 0)
          return fail(cat(bufferName(i), " has a negative dimension in shape ",
                          shapeString(b->shape())));
        if (d != 0 && bytes > kMaxBytes / uint64_t(d))
          return fail(cat(bufferName(i), " of shape ", shapeString(b->shape()),
                          " is larger than the limit ", kMaxBytes, " bytes"));
        bytes *= uint64_t(d);
      }
      const Arena *a = plan_.arenas()->Get(b->arena());
      ranges_.push_back({b->arena(), b->offset(), b->offset() + bytes});
      // Both terms are at most kMaxBytes (2^56): the sum cannot wrap.
      if (b->offset() > kMaxBytes || b->offset() + bytes > a->bytes())
        return fail(cat(bufferName(i), " [offset ", b->offset(), ", ", bytes,
                        " bytes] lies outside arena ", b->arena(), " (",
                        categoryName(a->category()), ", ", a->bytes(),
                        " bytes)"));
      if (b->offset() % plan::dtypeSize(b->dtype()) != 0)
        return fail(cat(bufferName(i), " at offset ", b->offset(),
                        " is not aligned to its ", plan::dtypeName(b->dtype()),
                        " elements"));
    }
    return true;
  }

  bool checkVariables() {
    uint32_t n = count(plan_.variables());
    std::unordered_set<std::string_view> names;
    for (uint32_t i = 0; i < n; ++i) {
      const Variable *v = plan_.variables()->Get(i);
      std::string what = cat("variable ", i, " (", quote(v->name()), ")");
      if (!v->name() || v->name()->size() == 0)
        return fail(cat("variable ", i, " has no name"));
      if (!names.insert(v->name()->string_view()).second)
        return fail(cat(what, " is declared twice"));
      if (!isValid(v->kind()))
        return fail(cat(what, " has unknown kind ", int(v->kind())));
      if (!isValid(v->init()))
        return fail(cat(what, " has unknown initializer ", int(v->init())));
      if (v->init() == InitKind::normal &&
          !(std::isfinite(v->std()) && v->std() >= 0))
        return fail(cat(what, " has a normal initializer with std ", v->std()));
      if (!checkBufferId(v->buffer(), what))
        return false;
      if (v->sharded() && !checkSharded(*v, what))
        return false;
      if (v->tensor_split_dim() != -1 && !checkTensorSplit(*v, what))
        return false;
    }
    return checkAliases(names);
  }

  /// Plan.aliases: each names a parameter and is no variable's name.
  bool checkAliases(std::unordered_set<std::string_view> names) {
    std::unordered_set<std::string_view> params;
    for (uint32_t i = 0; i < count(plan_.variables()); ++i)
      if (plan_.variables()->Get(i)->kind() == VarKind::param)
        params.insert(plan_.variables()->Get(i)->name()->string_view());
    for (uint32_t i = 0; i < count(plan_.aliases()); ++i) {
      const Alias *a = plan_.aliases()->Get(i);
      std::string what = cat("alias ", i, " (", quote(a->name()), ")");
      if (!a->name() || a->name()->size() == 0)
        return fail(cat("alias ", i, " has no name"));
      if (!a->of() || !params.count(a->of()->string_view()))
        return fail(cat(what, " ties to ", quote(a->of()),
                        ", which is not a parameter"));
      if (!names.insert(a->name()->string_view()).second)
        return fail(cat(what, " is also a variable's or another alias's name"));
    }
    return true;
  }

  /// A ZeRO stage 3 parameter: its part of the group lies in the ranks'
  /// shards (the buffer itself was checked by checkBuffers).
  bool checkSharded(const Variable &v, const std::string &what) {
    const Buffer *b = plan_.buffers()->Get(v.buffer());
    if (!dsc::isFloat(dsc::DType(static_cast<uint8_t>(b->dtype()))))
      return fail(cat(what, " is sharded but ", bufferName(v.buffer()), " is ",
                      plan::dtypeName(b->dtype()),
                      "; sharded variables are floating-point"));
    if (count(b->shape()) != 1)
      return fail(cat(what, " is sharded but ", bufferName(v.buffer()),
                      " has shape ", shapeString(b->shape()),
                      "; a shard is 1-D"));
    if (!v.shape())
      return fail(cat(what, " is sharded but has no shape"));
    if (!aligned(v.shape()))
      return fail(cat(what, " has a misaligned shape (corrupt plan)"));
    std::string shape = shapeString(v.shape());
    auto any = [&](auto pred) {
      return std::any_of(v.shape()->begin(), v.shape()->end(), pred);
    };
    if (any([](int64_t d) { return d < 0; }))
      return fail(cat(what, " has a negative dimension in shape ", shape));
    if (any([](int64_t d) { return d == 0; }))
      return fail(cat(what, " is sharded with shape ", shape,
                      "; a sharded variable has at least one element"));
    // S < 2^54 (checkBuffers), so world x S cannot wrap before the limit.
    uint64_t world = plan_.world_size(), s = uint64_t(b->shape()->Get(0));
    if (s != 0 && world > kMaxBytes / s)
      return fail(cat(what, " is sharded over a group of ", world, " x ", s,
                      " elements, more than the limit ", kMaxBytes));
    // Every dimension is at least 1: stop before the product passes the
    // group (and could wrap).
    uint64_t group = world * s, numel = 1;
    bool fits = true;
    for (int64_t d : *v.shape()) {
      if (uint64_t(d) > group / numel) {
        fits = false;
        break;
      }
      numel *= uint64_t(d);
    }
    if (!fits || v.shard_offset() > group - numel)
      return fail(cat(what, " of shape ", shape, " at shard offset ",
                      v.shard_offset(), " does not fit its group: ", world,
                      " rank", plural(world), " x ", s, " elements (",
                      bufferName(v.buffer()), ")"));
    return true;
  }

  /// A tensor-parallel part: dimension `dim` of the whole shape, of
  /// `blocks` blocks each cut into the group's parts, is the buffer's.
  bool checkTensorSplit(const Variable &v, const std::string &what) {
    const Buffer *b = plan_.buffers()->Get(v.buffer());
    const int64_t dim = v.tensor_split_dim(), blocks = v.tensor_split_blocks();
    const uint32_t parts = plan_.tensor_parallel();
    if (!aligned(v.shape()))
      return fail(cat(what, " has a misaligned shape (corrupt plan)"));
    if (!v.shape() || !b->shape() ||
        (!v.sharded() && v.shape()->size() != b->shape()->size()) || dim < 0 ||
        dim >= int64_t(v.shape()->size()) || blocks < 1)
      return fail(cat(what, ": tensor_split_dim ", dim, " (", blocks,
                      " blocks) does not fit shape ", shapeString(v.shape()),
                      " and ", bufferName(v.buffer())));
    if (v.sharded()) // the part's shape, sharded: its blocks must divide
      return v.shape()->Get(dim) % blocks == 0
                 ? true
                 : fail(cat(what, ": dimension ", dim, " of ",
                            shapeString(v.shape()), " is not ", blocks,
                            " blocks"));
    for (uint32_t d = 0; d < v.shape()->size(); ++d) {
      int64_t whole = v.shape()->Get(d), part = b->shape()->Get(d);
      bool ok = int64_t(d) == dim
                    ? whole % (blocks * parts) == 0 && part * parts == whole
                    : part == whole;
      if (!ok)
        return fail(cat(
            what, " of shape ", shapeString(v.shape()), " cut along dimension ",
            dim, " in ", blocks, " blocks over ", parts, " ranks is not ",
            bufferName(v.buffer()), " of shape ", shapeString(b->shape())));
    }
    return true;
  }

  bool checkConstants() {
    uint32_t n = count(plan_.constants());
    for (uint32_t i = 0; i < n; ++i) {
      const Constant *c = plan_.constants()->Get(i);
      std::string what = cat("constant ", i);
      if (!checkBufferId(c->buffer(), what))
        return false;
      const Buffer *b = plan_.buffers()->Get(c->buffer());
      uint64_t elem = plan::dtypeSize(b->dtype());
      uint64_t bytes = ranges_[c->buffer()].end - ranges_[c->buffer()].begin;
      uint64_t have = count(c->data());
      if (have != bytes && have != elem)
        return fail(cat(what, " has ", have, " bytes; ",
                        bufferName(c->buffer()), " needs ", bytes, " (or ",
                        elem, " for a splat)"));
    }
    return true;
  }

  bool checkPrograms() {
    uint32_t n = count(plan_.programs());
    std::unordered_set<std::string_view> names;
    for (uint32_t i = 0; i < n; ++i) {
      const Program *p = plan_.programs()->Get(i);
      if (!p->name() || p->name()->size() == 0)
        return fail(cat("program ", i, " has no name"));
      if (!names.insert(p->name()->string_view()).second)
        return fail(cat("program ", quote(p->name()), " is declared twice"));
    }
    for (std::string_view required : {kMicroStepProgram, kApplyProgram})
      if (!names.count(required))
        return fail(cat("the plan has no program '", required,
                        "' (dsrun runs micro_step and apply)"));
    for (uint32_t i = 0; i < n; ++i)
      if (!checkProgram(*plan_.programs()->Get(i)))
        return false;
    return true;
  }

  bool checkArity(const std::string &what, uint32_t have, int takes,
                  const char *noun) {
    if (takes < 0 || have == uint32_t(takes))
      return true;
    return fail(cat(what, " has ", have, " ", noun, plural(have),
                    ", the kernel takes ", takes));
  }

  /// Program.arena_peaks: none, or one per arena within its size.
  bool checkArenaPeaks(const Program &p, const std::string &prog) {
    const uint32_t arenas = count(plan_.arenas()), n = count(p.arena_peaks());
    if (!aligned(p.arena_peaks()))
      return fail(cat(prog, " has misaligned arena peaks (corrupt plan)"));
    if (n != 0 && n != arenas)
      return fail(
          cat(prog, " has ", n, " arena peaks for ", arenas, " arenas"));
    for (uint32_t a = 0; a < n; ++a)
      if (p.arena_peaks()->Get(a) > plan_.arenas()->Get(a)->bytes())
        return fail(cat(prog, ": its peak in arena ", a, " (",
                        p.arena_peaks()->Get(a),
                        " bytes) is past the arena's end (",
                        plan_.arenas()->Get(a)->bytes(), " bytes)"));
    return true;
  }

  bool checkProgram(const Program &p) {
    std::string prog = cat("program ", quote(p.name()));
    if (p.num_events() > kMaxEvents)
      return fail(cat(prog, " declares ", p.num_events(),
                      " events, more than the limit ", kMaxEvents));
    for (uint32_t k = 0; k < count(p.inputs()); ++k)
      if (!checkBufferId(p.inputs()->Get(k), cat(prog, " input ", k)))
        return false;
    for (uint32_t k = 0; k < count(p.outputs()); ++k)
      if (!checkBufferId(p.outputs()->Get(k), cat(prog, " output ", k)))
        return false;
    if (!checkArenaPeaks(p, prog))
      return false;

    // The instruction that records each event; every event is recorded at
    // most once per run and only waited on after (in program order) the
    // instruction recording it. Program order is then a valid order for the
    // streams together, so the run cannot deadlock.
    std::vector<int64_t> recordedBy(p.num_events(), -1);
    for (uint32_t i = 0; i < count(p.instrs()); ++i) {
      const Instr *in = p.instrs()->Get(i);
      std::string at = cat(prog, " instruction ", i);
      if (!in->kernel() || in->kernel()->size() == 0)
        return fail(cat(at, " has no kernel"));
      const KernelInfo *info = backend_.findKernel(in->kernel()->string_view(),
                                                   memorySpace(in->space()));
      if (!info)
        return fail(cat(at, " uses unknown kernel ", quote(in->kernel())));
      std::string what = cat(at, " (", info->name, ")");
      if (!isValid(in->stream()))
        return fail(cat(what, " has unknown stream ", int(in->stream())));
      // One stream issues every collective, so each rank issues them in
      // program order: the same order everywhere, as MPI requires.
      if (info->name.substr(0, 5) == "comm." && in->stream() != Stream::comm)
        return fail(cat(what, " runs on the ", streamName(in->stream()),
                        " stream; collectives run on the comm stream"));
      if (!aligned(in->int_attrs()) || !aligned(in->float_attrs()))
        return fail(cat(what, " has misaligned attributes (corrupt plan)"));
      if (!checkArity(what, count(in->inputs()), info->numInputs, "input") ||
          !checkArity(what, count(in->outputs()), info->numOutputs, "output") ||
          !checkArity(what, count(in->int_attrs()), info->numIntAttrs,
                      "int attribute") ||
          !checkArity(what, count(in->float_attrs()), info->numFloatAttrs,
                      "float attribute"))
        return false;
      for (uint32_t k = 0; k < count(in->inputs()); ++k)
        if (!checkBufferId(in->inputs()->Get(k), cat(what, " input ", k)))
          return false;
      for (uint32_t k = 0; k < count(in->outputs()); ++k) {
        uint32_t id = in->outputs()->Get(k);
        if (!checkBufferId(id, cat(what, " output ", k)))
          return false;
        // Constants are filled once per Session, not once per run.
        for (uint32_t c = 0; c < count(plan_.constants()); ++c) {
          uint32_t constant = plan_.constants()->Get(c)->buffer();
          if (overlaps(ranges_[id], ranges_[constant]))
            return fail(cat(what, " writes ", bufferName(id),
                            ", which overlaps constant ", c, " (",
                            bufferName(constant), ")"));
        }
      }
      if (!checkPlacement(*in, what) || !checkDTypes(*in, *info, what))
        return false;
      for (uint32_t k = 0; k < count(in->wait()); ++k) {
        uint32_t e = in->wait()->Get(k);
        if (e >= p.num_events())
          return fail(cat(what, " waits on event ", e, "; the program has ",
                          p.num_events(), " event", plural(p.num_events())));
        if (recordedBy[e] < 0)
          return fail(cat(what, " waits on event ", e,
                          ", which no earlier instruction records"));
      }
      for (uint32_t k = 0; k < count(in->record()); ++k) {
        uint32_t e = in->record()->Get(k);
        if (e >= p.num_events())
          return fail(cat(what, " records event ", e, "; the program has ",
                          p.num_events(), " event", plural(p.num_events())));
        if (recordedBy[e] >= 0)
          return fail(cat(what, " records event ", e, " again (instruction ",
                          recordedBy[e],
                          " records it); an event is recorded once per run"));
        recordedBy[e] = i;
      }
    }
    return checkHazards(p, prog, recordedBy);
  }

  /// The instruction runs in a space the backend runs, and reaches the
  /// arenas of all its operands from there.
  bool checkPlacement(const Instr &in, const std::string &what) {
    Space where = in.space();
    if (!isValid(where))
      return fail(cat(what, " is placed in unknown space ", int(where)));
    if (!backend_.runsIn(memorySpace(where)))
      return fail(cat(what, " is placed in the ", spaceName(where),
                      " space, where backend ", backend_.name(),
                      " runs nothing"));
    auto reach = [&](uint32_t id, const char *role, uint32_t k) {
      uint32_t a = plan_.buffers()->Get(id)->arena();
      Space data = plan_.arenas()->Get(a)->space();
      if (backend_.reaches(memorySpace(where), memorySpace(data)))
        return true;
      return fail(cat(what, " runs in the ", spaceName(where), " space but ",
                      role, " ", k, " is ", bufferName(id), " in arena ", a,
                      " (", spaceName(data), "), which backend ",
                      backend_.name(), " cannot reach from there"));
    };
    for (uint32_t k = 0; k < count(in.inputs()); ++k)
      if (!reach(in.inputs()->Get(k), "input", k))
        return false;
    for (uint32_t k = 0; k < count(in.outputs()); ++k)
      if (!reach(in.outputs()->Get(k), "output", k))
        return false;
    return true;
  }

  /// The backend has a variant of the kernel for the operands' dtypes.
  bool checkDTypes(const Instr &in, const KernelInfo &info,
                   const std::string &what) {
    std::vector<dsc::DType> ins, outs;
    auto dtypeOf = [&](uint32_t id) {
      return dsc::DType(
          static_cast<uint8_t>(plan_.buffers()->Get(id)->dtype()));
    };
    for (uint32_t id : ids(in.inputs()))
      ins.push_back(dtypeOf(id));
    for (uint32_t id : ids(in.outputs()))
      outs.push_back(dtypeOf(id));
    DTypeList i{ins.data(), ins.size()}, o{outs.data(), outs.size()};
    const MemorySpace where = memorySpace(in.space());
    if (backend_.findKernel(info.name, i, o, where))
      return true;
    std::string have;
    for (const KernelInfo &k : backend_.kernelVariants(info.name, where))
      have += cat(have.empty() ? "" : " or ", k.dtypes);
    return fail(cat(what, " has no variant for dtypes ", dtypeSignature(i, o),
                    " on backend ", backend_.name(), " (it has ", have, ")"));
  }

  /// Streams share memory and synchronize only through events, so two
  /// instructions on different streams that touch overlapping bytes, one of
  /// them writing, must be ordered by events; otherwise the result depends on
  /// timing. Vector clocks: clock[i][s] = how many instructions of stream s
  /// happen before instruction i (or are i). Only the instructions of other
  /// streams not yet ordered before i (a short window in a well-synchronized
  /// plan) need checking.
  bool checkHazards(const Program &p, const std::string &prog,
                    const std::vector<int64_t> &recordedBy) {
    using Clock = std::array<uint32_t, 4>;
    uint32_t n = count(p.instrs());
    std::vector<Clock> clock(n);
    std::array<std::vector<uint32_t>, 4> order; // per stream, so far
    for (uint32_t i = 0; i < n; ++i) {
      const Instr *in = p.instrs()->Get(i);
      int s = int(in->stream());
      Clock c = order[s].empty() ? Clock{} : clock[order[s].back()];
      for (uint32_t e : ids(in->wait()))
        for (int t = 0; t < 4; ++t)
          c[t] = std::max(c[t], clock[recordedBy[e]][t]);
      c[s] = uint32_t(order[s].size() + 1);
      clock[i] = c;
      for (int t = 0; t < 4; ++t)
        for (size_t k = c[t]; t != s && k < order[t].size(); ++k)
          if (!checkConflict(prog, *p.instrs()->Get(order[t][k]), order[t][k],
                             *in, i))
            return false;
      order[s].push_back(i);
    }
    return true;
  }

  /// Instructions `a` (earlier) and `b` may run at the same time.
  bool checkConflict(const std::string &prog, const Instr &a, uint32_t ai,
                     const Instr &b, uint32_t bi) {
    auto operands = [](const Instr &in) {
      std::vector<std::pair<uint32_t, bool>> ops; // (buffer, writes)
      for (uint32_t id : ids(in.inputs()))
        ops.push_back({id, false});
      for (uint32_t id : ids(in.outputs()))
        ops.push_back({id, true});
      return ops;
    };
    for (auto [x, xWrites] : operands(a))
      for (auto [y, yWrites] : operands(b)) {
        const Range &rx = ranges_[x], &ry = ranges_[y];
        if (!overlaps(rx, ry) || !(xWrites || yWrites))
          continue;
        auto side = [&](const Instr &in, uint32_t i, uint32_t id, bool w) {
          return cat("instruction ", i, " (", printable(in.kernel()->str()),
                     " on ", streamName(in.stream()), ") ",
                     w ? "writes " : "reads ", bufferName(id));
        };
        return fail(cat(prog, " ", side(a, ai, x, xWrites), " and ",
                        side(b, bi, y, yWrites),
                        " with no event ordering them"));
      }
    return true;
  }

  /// Each buffer's bytes: [begin, end) in `arena`.
  struct Range {
    uint32_t arena;
    uint64_t begin, end;
  };

  static bool overlaps(const Range &x, const Range &y) {
    return x.arena == y.arena && x.begin < y.end && y.begin < x.end &&
           x.begin < x.end && y.begin < y.end;
  }

  const Plan &plan_;
  const Backend &backend_;
  std::vector<Range> ranges_;
  std::string &error_;
};

} // namespace

std::unique_ptr<LoadedPlan> LoadedPlan::load(const std::string &path,
                                             std::string &error,
                                             Backend &backend) {
  // A FlatBuffer cannot exceed 2 GiB (32-bit offsets): a larger file is
  // not a plan, and is refused before it is read into memory.
  constexpr uint64_t kMaxPlanBytes = uint64_t(2) << 30;
  std::vector<uint8_t> bytes;
  if (!readRegularFile(path, bytes, error, kMaxPlanBytes))
    return nullptr;
  return fromBytes(std::move(bytes), path, error, backend);
}

std::unique_ptr<LoadedPlan> LoadedPlan::fromBytes(std::vector<uint8_t> bytes,
                                                  const std::string &what,
                                                  std::string &error,
                                                  Backend &backend) {
  // A FlatBuffer starts with the root offset and the 4-byte identifier.
  if (bytes.size() < 8) {
    error = cat(what, ": not a dsc plan (", bytes.size(), " byte",
                plural(bytes.size()), ", too short for a plan header)");
    return nullptr;
  }
  if (!PlanBufferHasIdentifier(bytes.data())) {
    std::string_view id(reinterpret_cast<const char *>(bytes.data()) + 4, 4);
    error = cat(what, ": not a dsc plan (file identifier '", printable(id),
                "', expected '", kFileIdentifier, "')");
    return nullptr;
  }
  flatbuffers::Verifier::Options options;
  options.max_depth = 16;
  options.max_tables = 1u << 26;
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), options);
  if (!VerifyPlanBuffer(verifier)) {
    error = cat(what, ": corrupt or truncated plan (", bytes.size(),
                " bytes; the FlatBuffers verifier rejects it)");
    return nullptr;
  }
  const Plan *plan = GetPlan(bytes.data());
  // A plan of another schema version is reported as such by the checker.
  if (plan->schema_version() == kSchemaVersion) {
    std::optional<size_t> at = checksumOffset(bytes.data(), bytes.size());
    if (!at) {
      error = cat(what, ": plan has no checksum (dsc writes one into every "
                        "plan; this file was not written by dsc)");
      return nullptr;
    }
    uint64_t computed = computeChecksum(bytes.data(), bytes.size(), *at);
    if (computed != plan->checksum()) {
      error = cat(what, ": checksum mismatch (the file says ",
                  hex16(plan->checksum()), ", its bytes give ", hex16(computed),
                  "): the plan was changed or damaged after dsc wrote it");
      return nullptr;
    }
  }
  std::string problem;
  if (!Checker(*plan, backend, problem).check()) {
    error = cat(what, ": ", problem);
    return nullptr;
  }
  auto loaded = std::unique_ptr<LoadedPlan>(new LoadedPlan());
  loaded->bytes_ = std::move(bytes);
  // Moving a vector keeps its heap block, so the root stays valid.
  loaded->plan_ = GetPlan(loaded->bytes_.data());
  loaded->name_ = what;
  loaded->backend_ = &backend;
  return loaded;
}

uint32_t LoadedPlan::stageCount() const {
  return plan_->stages() ? plan_->stages()->size() : 0;
}

uint32_t LoadedPlan::stageOfRank(int rank) const {
  const uint32_t group = std::max<uint32_t>(1, plan_->tensor_parallel());
  return stageCount() ? uint32_t(rank) / group % stageCount() : 0;
}

std::unique_ptr<LoadedPlan> LoadedPlan::stage(uint32_t s,
                                              std::string &error) const {
  if (s >= stageCount()) {
    error = cat(name_, ": no pipeline stage ", s, " (the file holds ",
                stageCount(), ")");
    return nullptr;
  }
  const auto *nested = plan_->stages()->Get(s)->plan();
  std::unique_ptr<LoadedPlan> loaded =
      fromBytes(std::vector<uint8_t>(nested->begin(), nested->end()),
                cat(name_, " (stage ", s, ")"), error, *backend_);
  if (loaded &&
      (loaded->plan_->pipeline_stage() != s ||
       loaded->plan_->pipeline_parallel() != stageCount() ||
       loaded->plan_->world_size() != plan_->world_size() ||
       loaded->plan_->tensor_parallel() != plan_->tensor_parallel())) {
    error = cat(loaded->name_, ": its plan is stage ",
                loaded->plan_->pipeline_stage(), " of ",
                loaded->plan_->pipeline_parallel(), " for ",
                loaded->plan_->world_size(), " ranks in tensor groups of ",
                loaded->plan_->tensor_parallel(), ", not stage ", s, " of ",
                stageCount(), " for ", plan_->world_size(), " in groups of ",
                plan_->tensor_parallel());
    return nullptr;
  }
  return loaded;
}

} // namespace dsc::rt
