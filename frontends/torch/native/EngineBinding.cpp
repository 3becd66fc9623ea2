//===- EngineBinding.cpp - _dsc_native.Engine ----------------------------===//
//
// Engine(args): a run opened in this process as dsrun opens one, stepped
// by the caller (runtime/tooling/StepEngine.h): micro_step(tokens,
// targets) -> loss (a pipeline's stage: step_batch(tokens, targets) with
// the step's micro-batches), apply() -> {lr, grad_norm, skipped[, beta1]},
// export_weights(path[, every_rank]), save_checkpoint(dir, client_state_json)
// -> path, load_checkpoint(path) -> notes; latest_checkpoint(dir) -> (path,
// notes). Batches are C-contiguous int32 arrays of the compiled shape (anything
// else is converted when it can be, else one InputError naming the
// argument); the GIL is released while the plan runs. Bad input raises
// InputError; a failed step TrainingError.
//
//===----------------------------------------------------------------------===//

#include "frontends/torch/native/Bindings.h"
#include "runtime/tooling/Checkpoint.h"
#include "runtime/tooling/StepEngine.h"
#include "runtime/tooling/Trainer.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

namespace py = pybind11;

namespace dsc::python {
namespace {

using Batch = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

std::unique_ptr<rt::StepEngine>
openEngine(const std::vector<std::string> &args) {
  int status = 0;
  std::string error;
  std::unique_ptr<rt::StepEngine> engine;
  {
    py::gil_scoped_release nogil;
    engine = rt::StepEngine::open(args, status, error);
  }
  if (!engine) {
    if (status == rt::kExitBadInput)
      throw InputError(error);
    throw TrainingFailure(error);
  }
  return engine;
}

/// `name`'s shape against the compiled [rows, seqLen].
void checkBatch(const rt::StepEngine &engine, const Batch &batch,
                const char *name, uint32_t rows, const char *rowsName) {
  const std::vector<int64_t> want = {rows, engine.seqLen()};
  std::vector<int64_t> got(batch.shape(), batch.shape() + batch.ndim());
  if (got == want)
    return;
  auto text = [](const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
      s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  };
  throw InputError(std::string(name) + ": shape " + text(got) +
                   ", but the plan was compiled for " + text(want) + " (" +
                   rowsName + ", sequence length)");
}

/// One batch through `run` (the micro-step or the eval program), the GIL
/// released; `rows` and `rowsName` the batch's compiled rows.
template <typename Run>
double runBatch(rt::StepEngine &engine, const Batch &tokens,
                const Batch &targets, uint32_t rows, const char *rowsName,
                Run run) {
  checkBatch(engine, tokens, "tokens", rows, rowsName);
  checkBatch(engine, targets, "targets", rows, rowsName);
  double loss = 0;
  std::string error;
  bool ok;
  {
    py::gil_scoped_release nogil;
    ok = run(tokens.data(), targets.data(), loss, error);
  }
  if (!ok)
    throw TrainingFailure(error);
  return loss;
}

double microStep(rt::StepEngine &engine, const Batch &tokens,
                 const Batch &targets) {
  return runBatch(
      engine, tokens, targets, engine.microBatch(), "micro-batch",
      [&](const int32_t *t, const int32_t *y, double &loss,
          std::string &error) { return engine.microStep(t, y, loss, error); });
}

double stepBatch(rt::StepEngine &engine, const Batch &tokens,
                 const Batch &targets) {
  return runBatch(
      engine, tokens, targets,
      engine.microBatch() * engine.microBatchesPerRun(),
      "micro-batch x gradient_accumulation_steps",
      [&](const int32_t *t, const int32_t *y, double &loss,
          std::string &error) { return engine.stepBatch(t, y, loss, error); });
}

double evalStep(rt::StepEngine &engine, const Batch &tokens,
                const Batch &targets) {
  if (engine.evalBatch() == 0)
    throw InputError("the plan has no eval program (compile it with this dsc)");
  return runBatch(
      engine, tokens, targets, engine.evalBatch(), "eval batch",
      [&](const int32_t *t, const int32_t *y, double &loss,
          std::string &error) { return engine.evalStep(t, y, loss, error); });
}

py::dict apply(rt::StepEngine &engine) {
  rt::ApplyOutcome outcome;
  std::string error;
  bool ok;
  {
    py::gil_scoped_release nogil;
    ok = engine.apply(outcome, error);
  }
  if (!ok)
    throw TrainingFailure(error);
  py::dict d;
  d["lr"] = outcome.lr;
  d["grad_norm"] = outcome.gradNorm;
  d["skipped"] = outcome.skipped;
  if (outcome.hasBeta1)
    d["beta1"] = outcome.beta1;
  return d;
}

void exportWeights(rt::StepEngine &engine, const std::string &path,
                   bool everyRank) {
  std::string error;
  bool ok;
  {
    py::gil_scoped_release nogil;
    ok = engine.exportWeights(path, everyRank, error);
  }
  if (!ok)
    throw TrainingFailure(error);
}

std::string saveCheckpoint(rt::StepEngine &engine, const std::string &dir,
                           const std::string &clientState) {
  std::string path, error;
  bool ok;
  {
    py::gil_scoped_release nogil;
    ok = engine.saveCheckpoint(dir, clientState, path, error);
  }
  if (!ok)
    throw TrainingFailure(error);
  return path;
}

std::vector<std::string> loadCheckpoint(rt::StepEngine &engine,
                                        const std::string &path) {
  std::vector<std::string> notes;
  std::string error;
  bool ok;
  {
    py::gil_scoped_release nogil;
    ok = engine.loadCheckpoint(path, notes, error);
  }
  if (!ok)
    throw InputError(error);
  return notes;
}

/// The newest committed checkpoint in `dir` ("" if none) and the notes on
/// what was skipped.
std::pair<std::string, std::vector<std::string>>
latestCheckpoint(const std::string &dir) {
  std::string path, error;
  std::vector<std::string> notes;
  if (!rt::findLatestCheckpoint(dir, path, notes, error))
    throw InputError(error);
  return {path, notes};
}

} // namespace

void bindEngine(py::module_ &m) {
  m.def("latest_checkpoint", &latestCheckpoint, py::arg("dir"));
  py::class_<rt::StepEngine>(m, "Engine")
      .def(py::init(&openEngine), py::arg("args"),
           "Opens the run dsrun's flags describe (the plan first).")
      .def("micro_step", &microStep, py::arg("tokens"), py::arg("targets"),
           "The step's next micro-step; returns this rank's loss.")
      .def("step_batch", &stepBatch, py::arg("tokens"), py::arg("targets"),
           "A pipeline's step of micro-batches at once: tokens and targets "
           "[micro-batch x gradient_accumulation_steps, seq_len]; the step's "
           "mean loss, the same on every rank")
      .def_property_readonly("micro_batches_per_run",
                             &rt::StepEngine::microBatchesPerRun)
      .def_property_readonly("pipeline_stages", &rt::StepEngine::pipelineStages)
      .def("eval_step", &evalStep, py::arg("tokens"), py::arg("targets"),
           "The plan's eval program on one batch; returns this rank's loss.")
      .def_property_readonly("eval_batch", &rt::StepEngine::evalBatch)
      .def("apply", &apply,
           "The optimizer step after accumulation_steps micro-steps.")
      .def("export_weights", &exportWeights, py::arg("path"),
           py::arg("every_rank") = false)
      .def("save_checkpoint", &saveCheckpoint, py::arg("dir"),
           py::arg("client_state"))
      .def("load_checkpoint", &loadCheckpoint, py::arg("path"))
      .def_property_readonly("micro_batch", &rt::StepEngine::microBatch)
      .def_property_readonly("seq_len", &rt::StepEngine::seqLen)
      .def_property_readonly("accumulation_steps",
                             &rt::StepEngine::accumulationSteps)
      .def_property_readonly("rank", &rt::StepEngine::rank)
      .def_property_readonly("world_size", &rt::StepEngine::worldSize)
      .def_property_readonly("data_rank", &rt::StepEngine::dataRank)
      .def_property_readonly("data_world_size", &rt::StepEngine::dataWorld)
      .def_property_readonly("pending_micro_steps",
                             &rt::StepEngine::pendingMicroSteps)
      .def_property_readonly("applied_steps", &rt::StepEngine::appliedSteps)
      .def_property_readonly("steps", &rt::StepEngine::steps)
      .def_property_readonly("next_lr", &rt::StepEngine::nextLr)
      .def_property_readonly("loss_scale", &rt::StepEngine::lossScale);
}

} // namespace dsc::python
