//===- Trace.h - Chrome trace-event files for --trace -----------*- C++ -*-===//
//
// Writes the Session's executed instructions as Chrome trace events (JSON
// array format; opens in Perfetto and chrome://tracing): one process per
// rank, one thread per stream, one complete ("X") event per instruction.
// Events are streamed to the file step by step, and the array format needs
// no closing bracket, so a run that dies still leaves a readable trace.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_TRACE_H
#define DSC_RUNTIME_TOOLING_TRACE_H

#include "runtime/exec/Session.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace dsc::rt {

class TraceWriter {
public:
  /// Creates `path` and writes the track names. Null + one line on error.
  static std::unique_ptr<TraceWriter> open(const std::string &path,
                                           uint32_t rank, std::string &error);
  ~TraceWriter();
  TraceWriter(const TraceWriter &) = delete;
  TraceWriter &operator=(const TraceWriter &) = delete;

  /// Appends one event per record, tagged with optimizer step `step`.
  void add(const std::vector<TraceRecord> &records, uint64_t step);
  /// Ends the array and closes the file; false + one line on a write error.
  bool close(std::string &error);

private:
  TraceWriter() = default;
  void event(const std::string &json);

  std::FILE *file_ = nullptr;
  std::string path_;
  uint32_t rank_ = 0;
  bool first_ = true;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_TRACE_H
