//===- CompileBinding.cpp - _dsc_native.compile ---------------------------===//
//
// compile(source, ...) -> (plan bytes, report dict, report text, notes):
// one compilation through compiler/Compile.h, as `dsc -o plan --report`.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compile.h"
#include "compiler/Report.h"
#include "compiler/StepTimeline.h"
#include "compiler/plan/PlanModel.h"
#include "frontends/torch/native/Bindings.h"
#include "passes/remat/RematPolicy.h"

#include <pybind11/stl.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace py = pybind11;

namespace dsc::python {
namespace {

py::dict memoryOf(const std::array<uint64_t, kNumCategories> &arenas) {
  py::dict d;
  uint64_t total = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    d[py::str(categoryName(static_cast<Category>(c)).str())] = arenas[c];
    total += arenas[c];
  }
  d["total"] = total;
  return d;
}

/// --report's numbers as data.
py::dict reportOf(const PlanModel &plan, const std::string &remat) {
  py::dict r;
  r["model"] = plan.options.model;
  r["parameters"] = parameterCount(plan);
  r["micro_batch"] = plan.microBatch;
  r["seq_len"] = plan.seqLen;
  r["vocab_size"] = plan.vocabSize;
  r["world_size"] = plan.options.worldSize;
  r["accumulation_steps"] = plan.options.accumulationSteps;
  py::dict memory;
  memory["device"] = memoryOf(plan.arenaBytes);
  if (plan.hasHostArenas())
    memory["host"] = memoryOf(plan.hostArenaBytes);
  r["memory"] = memory;
  py::list programs;
  for (const PlanProgram &p : plan.programs) {
    py::dict d;
    d["name"] = p.name;
    d["kernels"] = p.instrs.size();
    d["flops"] = p.flops;
    d["recomputed_flops"] = p.recomputedFlops;
    d["comm_bytes"] = p.commBytes;
    d["activation_bytes"] = p.activationBytes;
    programs.append(d);
  }
  r["programs"] = programs;
  r["remat"] = mlir::ds::remat::appliedPolicy(remat).str();
  // Which parameters the optimizer decays (ds-adamw's groups), by name.
  std::set<std::string> decay, noDecay;
  for (const PlanVariable &v : plan.variables)
    if (v.kind == 0) // a parameter (plan.fbs VarKind)
      (v.weightDecay ? decay : noDecay).insert(v.name);
  py::dict groups;
  groups["decay"] = std::vector<std::string>(decay.begin(), decay.end());
  groups["no_decay"] = std::vector<std::string>(noDecay.begin(), noDecay.end());
  r["weight_decay"] = groups;
  return r;
}

py::tuple compile(const std::string &source, bool isModelSpec,
                  const std::string &sourceName,
                  std::optional<std::string> config,
                  const std::string &configName, int64_t worldSize,
                  const std::string &remat,
                  std::optional<int64_t> activationMemory,
                  const std::string &deviceMemory,
                  std::optional<std::vector<std::string>> noDecay) {
  CompileRequest req;
  if (isModelSpec)
    req.model = source;
  else
    req.inputText = source;
  req.inputName = sourceName;
  if (config) {
    req.configText = *config;
    req.configName = configName;
  }
  req.worldSize = worldSize;
  req.remat = remat;
  req.activationMemory = activationMemory;
  req.deviceMemory = deviceMemory;
  req.noDecay = std::move(noDecay);
  std::vector<std::string> errors, notes;
  Compilation out;
  int status =
      dsc::compile(req, out, [&](CompileMessage kind, const std::string &line) {
        // MLIR's warnings and remarks are notes here, as dsc prints them
        // without failing; its errors fail the compilation.
        bool note = kind == CompileMessage::Note ||
                    (kind == CompileMessage::Diagnostic &&
                     line.find(": error: ") == std::string::npos);
        (note ? notes : errors).push_back(line);
      });
  if (status != 0) {
    std::string text;
    for (const std::string &e : errors)
      text += (text.empty() ? "" : "\n") + e;
    throw InputError(text.empty() ? "compilation failed" : text);
  }
  std::string reportText;
  llvm::raw_string_ostream os(reportText);
  // The report's timeline on dsc's default machine model (--machine h100).
  dsc::MachineModel machine;
  std::string unused;
  dsc::parseMachine("h100", machine, unused);
  printReport(out.plan->plan, out.remat, machine, os);
  os.flush();
  const std::vector<uint8_t> &bytes = out.plan->bytes;
  return py::make_tuple(
      py::bytes(reinterpret_cast<const char *>(bytes.data()), bytes.size()),
      reportOf(out.plan->plan, out.remat), reportText, notes);
}

} // namespace

void bindCompile(py::module_ &m) {
  m.def("compile", &compile, py::arg("source"), py::arg("is_model_spec"),
        py::arg("source_name"), py::arg("config"), py::arg("config_name"),
        py::arg("world_size"), py::arg("remat"), py::arg("activation_memory"),
        py::arg("device_memory"), py::arg("no_decay") = py::none(),
        "Compiles ds MLIR text (or a built-in model spec) into a plan: "
        "(plan bytes, report dict, report text, config notes).");
}

} // namespace dsc::python
