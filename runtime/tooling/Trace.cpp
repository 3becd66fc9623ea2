//===- Trace.cpp - Chrome trace-event files for --trace -------------------===//
#include "runtime/tooling/Trace.h"

#include "runtime/core/OutputPath.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

namespace dsc::rt {

namespace {

// Thread ids of the streams, in plan.fbs order; anything else goes last.
const char *const kStreams[] = {"compute", "comm", "h2d", "d2h"};
constexpr int kNumTracks = 4;

int streamTrack(std::string_view stream) {
  for (int i = 0; i < kNumTracks; ++i)
    if (stream == kStreams[i])
      return i;
  return kNumTracks;
}

std::string dump(const nlohmann::json &j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

std::unique_ptr<TraceWriter>
TraceWriter::open(const std::string &path, uint32_t rank, std::string &error) {
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  if (!(w->file_ = openStreamOutput(path, error))) {
    error = "--trace " + error;
    return nullptr;
  }
  w->path_ = path;
  w->rank_ = rank;
  std::fputs("[\n", w->file_);
  w->event(dump({{"ph", "M"},
                 {"name", "process_name"},
                 {"pid", rank},
                 {"args", {{"name", "rank " + std::to_string(rank)}}}}));
  for (int i = 0; i <= kNumTracks; ++i)
    w->event(
        dump({{"ph", "M"},
              {"name", "thread_name"},
              {"pid", rank},
              {"tid", i},
              {"args", {{"name", i < kNumTracks ? kStreams[i] : "other"}}}}));
  return w;
}

TraceWriter::~TraceWriter() {
  if (file_)
    std::fclose(file_);
}

void TraceWriter::event(const std::string &json) {
  std::fputs(first_ ? "" : ",\n", file_);
  std::fputs(json.c_str(), file_);
  first_ = false;
}

void TraceWriter::add(const std::vector<TraceRecord> &records, uint64_t step) {
  for (const TraceRecord &r : records) {
    nlohmann::json args = {{"step", step}, {"instr", r.instr}};
    if (!r.loc.empty())
      args["loc"] = std::string(r.loc);
    if (r.microBatch >= 0) { // a pipeline schedule's place
      args["micro_batch"] = r.microBatch;
      args["part"] = std::string(1, r.part);
    }
    event(dump({{"ph", "X"},
                {"name", std::string(r.kernel)},
                {"cat", std::string(r.program)},
                {"pid", rank_},
                {"tid", streamTrack(r.stream)},
                {"ts", double(r.beginNs) / 1e3},
                {"dur", double(r.endNs - r.beginNs) / 1e3},
                {"args", args}}));
  }
}

bool TraceWriter::close(std::string &error) {
  std::fputs("\n]\n", file_);
  bool ok = std::ferror(file_) == 0;
  ok = std::fclose(file_) == 0 && ok;
  file_ = nullptr;
  if (!ok)
    error = path_ + ": write failed";
  return ok;
}

} // namespace dsc::rt
