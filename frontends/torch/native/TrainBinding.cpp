//===- TrainBinding.cpp - _dsc_native.train -------------------------------===//
//
// train(args, callback) -> exit status: dsrun's runDsrun in this process,
// with `callback` called on every optimizer step with the --metrics
// record as a dict (the GIL is held only there). A callback that raises
// stops the run after that step, as SIGINT would, and the exception
// propagates. SIGINT and SIGTERM are dsrun's while it runs (finish the
// step, save, stop) and Python's again afterwards.
//
//===----------------------------------------------------------------------===//

#include "frontends/torch/native/Bindings.h"
#include "runtime/tooling/DsrunMain.h"
#include "runtime/tooling/Metrics.h"

#include <pybind11/stl.h>

#include <csignal>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace dsc::python {
namespace {

/// Puts back the SIGINT and SIGTERM handlers the caller had.
class SavedSignals {
public:
  SavedSignals() {
    sigaction(SIGINT, nullptr, &interrupt);
    sigaction(SIGTERM, nullptr, &terminate);
  }
  ~SavedSignals() {
    sigaction(SIGINT, &interrupt, nullptr);
    sigaction(SIGTERM, &terminate, nullptr);
  }

private:
  struct sigaction interrupt {};
  struct sigaction terminate {};
};

int train(const std::vector<std::string> &args, py::object callback) {
  py::module_ json = py::module_::import("json");
  std::optional<py::error_already_set> raised;
  rt::DsrunHooks hooks;
  if (!callback.is_none())
    hooks.onStep = [&](const rt::StepRecord &record) {
      py::gil_scoped_acquire gil;
      try {
        callback(json.attr("loads")(rt::metricsJson(record)));
        return true;
      } catch (py::error_already_set &e) {
        raised = std::move(e);
        return false; // stop after this step; the exception is re-raised
      }
    };
  int status;
  {
    SavedSignals saved;
    // Training holds no Python object: other threads run meanwhile.
    py::gil_scoped_release nogil;
    status = rt::runDsrun(args, hooks);
  }
  if (raised)
    throw std::move(*raised);
  return status;
}

} // namespace

void bindTrain(py::module_ &m) {
  m.def("train", &train, py::arg("args"), py::arg("callback") = py::none(),
        "Runs dsrun with these flags in this process; returns its exit "
        "status. callback(record) gets each step's metrics.");
}

} // namespace dsc::python
