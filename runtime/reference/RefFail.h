//===- RefFail.h - the reference kernels' error lines -----------*- C++ -*-===//
//
// Private to runtime/reference/: each kernel file builds its Error lines
// with this one helper.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_REFERENCE_REFFAIL_H
#define DSC_RUNTIME_REFERENCE_REFFAIL_H

#include "runtime/reference/RefKernels.h"

#include <sstream>

namespace dsc::ref::detail {

/// An Error whose line is the arguments streamed one after another.
template <typename... Args> Error fail(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return Error{os.str()};
}

} // namespace dsc::ref::detail

#endif // DSC_RUNTIME_REFERENCE_REFFAIL_H
