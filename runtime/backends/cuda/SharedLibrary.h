//===- SharedLibrary.h - NVIDIA libraries opened at run time ----*- C++ -*-===//
//
// cuBLASLt and NCCL are opened with dlopen when first needed (CublasLt.h
// says why), their entry points bound by name. Internal to
// runtime/backends/cuda; header-only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_SHAREDLIBRARY_H
#define DSC_RUNTIME_BACKENDS_CUDA_SHAREDLIBRARY_H

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace dsc::rt::cuda {

/// The first of `names` that loads; null with "cannot load WHAT: <the
/// loader's reason>" in `error`.
inline void *openLibrary(std::initializer_list<const char *> names,
                         const char *what, std::string &error) {
  std::string why;
  for (const char *name : names) {
    if (void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))
      return lib;
    const char *e = dlerror();
    why = e ? e : name;
  }
  error = std::string("cannot load ") + what + ": " + why;
  return nullptr;
}

/// Binds `fn` to `symbol` of `lib`; false with "WHAT has no SYMBOL".
template <typename Fn>
bool bindSymbol(void *lib, const char *symbol, Fn &fn, const char *what,
                std::string &error) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (!fn)
    error = std::string(what) + " has no " + symbol;
  return fn != nullptr;
}

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_SHAREDLIBRARY_H
