//===- Bindings.h - the parts of the _dsc_native Python module --*- C++ -*-===//
//
// dsc's Python API (frontends/torch/dsc) over the same libraries as the
// tools: compile() is dsc's compiler/Compile.h, gradients() the float64
// interpreter behind the VJP tests, train() dsrun's runDsrun with a
// per-step callback. Errors reach Python as dsc's own one-line messages.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_PYTHON_BINDINGS_H
#define DSC_FRONTENDS_PYTHON_BINDINGS_H

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

namespace dsc::python {

/// Bad input (exit status 2 in the tools): raised as dsc's InputError.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A step that failed (dsrun's exit status 1): TrainingError in Python.
struct TrainingFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void bindCompile(pybind11::module_ &m);
void bindGradients(pybind11::module_ &m);
void bindTrain(pybind11::module_ &m);
void bindEngine(pybind11::module_ &m);

} // namespace dsc::python

#endif // DSC_FRONTENDS_PYTHON_BINDINGS_H
