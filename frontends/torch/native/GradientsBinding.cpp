//===- GradientsBinding.cpp - _dsc_native.gradients -----------------------===//
//
// gradients(mlir, weights, tokens, targets) -> (loss, {name: gradient}):
// the exported graph in float64 through the reference interpreter, with
// ds-autodiff's backward, as the VJP tests run it. The frontend's op tests
// compare both with PyTorch's own forward and backward in float64.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/interpreter/Widen.h"
#include "dialects/ds/DsOps.h"
#include "frontends/torch/native/Bindings.h"
#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/plan/VariableNames.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

namespace py = pybind11;
using namespace mlir;

namespace dsc::python {
namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

ref::Tensor toTensor(const Array &a) {
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  ref::Tensor t(shape);
  std::copy(a.data(), a.data() + a.size(), t.data.begin());
  return t;
}

Array toArray(const ref::Tensor &t) {
  Array a(std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
  std::copy(t.data.begin(), t.data.end(), a.mutable_data());
  return a;
}

py::tuple gradients(const std::string &mlir, const py::dict &weights,
                    const Array &tokens, const Array &targets, uint64_t seed) {
  DialectRegistry registry;
  registerAll(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  std::string errors;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      errors += (errors.empty() ? "" : "\n") + d.str();
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(mlir, &context);
  if (!module || failed(verify(*module)))
    throw InputError("the graph does not parse: " + errors);
  if (failed(widenToF64(*module)))
    throw InputError("the graph cannot be widened to float64: " + errors);
  PassManager pm(&context);
  pm.addPass(ds::createDsVerifyInput());
  pm.addPass(ds::createDsAutodiff());
  if (failed(pm.run(*module)))
    throw InputError(errors);

  Interpreter interp(*module, seed);
  interp.setStep(1);
  if (failed(interp.initVariables()))
    throw InputError(errors);
  std::vector<std::string> params;
  for (auto var : module->getOps<ds::VariableOp>()) {
    if (var.getKind() != ds::VariableKind::param)
      continue;
    std::string name = var.getSymName().str();
    params.push_back(name);
    if (!weights.contains(name))
      throw InputError("no weight for parameter " + name);
    ref::Tensor value = toTensor(weights[py::str(name)].cast<Array>());
    if (value.shape != interp.variable(name).shape)
      throw InputError("weight " + name + " has the wrong shape");
    interp.variable(name) = std::move(value);
  }
  if (weights.size() != params.size())
    throw InputError("weights name " + std::to_string(weights.size()) +
                     " tensors, the graph has " +
                     std::to_string(params.size()) + " parameters");
  // Everything in float64: the comparison is against PyTorch in float64.
  interp.setRounding(false);
  std::vector<ref::Tensor> out;
  if (failed(interp.run(plan::kMicroStepProgram,
                        {toTensor(tokens), toTensor(targets)}, out)) ||
      out.empty())
    throw InputError("interpreting @micro_step failed: " + errors);
  py::dict grads;
  for (const std::string &name : params)
    grads[py::str(name)] =
        toArray(interp.variable(plan::stateName(name, plan::kGradSuffix)));
  return py::make_tuple(out[0].data[0], grads);
}

} // namespace

void bindGradients(py::module_ &m) {
  m.def("gradients", &gradients, py::arg("mlir"), py::arg("weights"),
        py::arg("tokens"), py::arg("targets"), py::arg("seed") = 0,
        "Loss and parameter gradients of a ds graph in float64 (the "
        "reference interpreter after ds-autodiff).");
}

} // namespace dsc::python
