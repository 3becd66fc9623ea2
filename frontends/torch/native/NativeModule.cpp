//===- NativeModule.cpp - the _dsc_native Python module -------------------===//

#include "frontends/torch/native/Bindings.h"
#include "runtime/backends/AllBackends.h"

namespace py = pybind11;

PYBIND11_MODULE(_dsc_native, m) {
  m.doc() = "dsc's compiler and runtime, for the dsc Python package";
  // An executable's duty (AllBackends.h): this module is dsrun's main here.
  dsc::rt::registerAvailableBackends();
  py::register_exception<dsc::python::InputError>(m, "InputError",
                                                  PyExc_ValueError);
  dsc::python::bindCompile(m);
  dsc::python::bindGradients(m);
  py::register_exception<dsc::python::TrainingFailure>(m, "TrainingError",
                                                       PyExc_RuntimeError);
  dsc::python::bindTrain(m);
  dsc::python::bindEngine(m);
}
