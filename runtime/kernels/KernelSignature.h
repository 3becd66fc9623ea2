//===- KernelSignature.h - which operand dtypes a kernel variant takes -*- C++
//-*-===//
//
// A backend registers one variant of a kernel per dtype signature, so f16
// and bf16 variants sit beside the f32 one under the same name and the plan
// verifier can refuse, before anything runs, an instruction whose operands
// no variant takes. A signature is text, written in the kernel table and
// quoted in errors:
//
//   signature := side "->" side
//   side      := "" | element ("," element)*
//   element   := choice ["*"]        "*" (last element only): zero or more
//                                    further operands, each like `choice`
//   choice    := token ("|" token)*
//   token     := f32 | f16 | bf16 | f64 | i32 | i64
//              | idx                 i32 or i64
//              | float               f32, f16, bf16 or f64
//              | any                 any dtype
//              | T                   any dtype, the same for every T of the
//                                    signature (alone, not in a choice)
//
// e.g. "f32,f32->f32" (matmul), "f32,idx->f32" (embedding), "T*->T"
// (concat), "float->float" (cast). Header-only, standard library only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_KERNELS_KERNELSIGNATURE_H
#define DSC_RUNTIME_KERNELS_KERNELSIGNATURE_H

#include "runtime/core/DType.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsc::rt {

/// Operand dtypes in order (inputs or outputs of one instruction).
struct DTypeList {
  const DType *data = nullptr;
  size_t size = 0;
};

namespace signature_detail {

constexpr unsigned kAllDTypes = 0x3f; // bits of DType's six values
constexpr unsigned bit(DType t) { return 1u << unsigned(t); }

/// The dtypes `token` stands for; 0 for an unknown token. `T` is not a set.
inline unsigned tokenSet(std::string_view token) {
  static constexpr DType kAll[] = {DType::f32, DType::f16, DType::bf16,
                                   DType::f64, DType::i32, DType::i64};
  for (DType t : kAll)
    if (token == dtypeName(t))
      return bit(t);
  if (token == "idx")
    return bit(DType::i32) | bit(DType::i64);
  if (token == "float")
    return bit(DType::f32) | bit(DType::f16) | bit(DType::bf16) |
           bit(DType::f64);
  if (token == "any")
    return kAllDTypes;
  return 0;
}

/// Splits `text` at the first `sep`: returns the part before, leaves the
/// rest (after the separator) in `text`; `found` says whether there was one.
inline std::string_view take(std::string_view &text, char sep, bool &found) {
  size_t at = text.find(sep);
  found = at != std::string_view::npos;
  std::string_view head = text.substr(0, at);
  text = found ? text.substr(at + 1) : std::string_view();
  return head;
}

/// Whether `t` is one of `choice`'s dtypes; binds or checks the type
/// variable (`typeVar` < 0 while unbound).
inline bool matchChoice(std::string_view choice, DType t, int &typeVar) {
  if (choice == "T") {
    if (typeVar < 0)
      typeVar = int(t);
    return typeVar == int(t);
  }
  bool more = true;
  while (more) {
    std::string_view token = take(choice, '|', more);
    if (tokenSet(token) & bit(t))
      return true;
  }
  return false;
}

inline bool matchSide(std::string_view side, DTypeList ts, int &typeVar) {
  size_t i = 0;
  bool more = !side.empty();
  while (more) {
    std::string_view element = take(side, ',', more);
    if (!element.empty() && element.back() == '*') {
      element.remove_suffix(1);
      for (; i < ts.size; ++i)
        if (!matchChoice(element, ts.data[i], typeVar))
          return false;
      return true;
    }
    if (i >= ts.size || !matchChoice(element, ts.data[i], typeVar))
      return false;
    ++i;
  }
  return i == ts.size;
}

/// Whether one side is well formed; names the first bad element.
inline bool checkSide(std::string_view side, std::string &error) {
  bool more = !side.empty();
  while (more) {
    std::string_view element = take(side, ',', more);
    if (!element.empty() && element.back() == '*') {
      if (more) {
        error = "'*' on '" + std::string(element) + "', not the last element";
        return false;
      }
      element.remove_suffix(1);
    }
    if (element == "T")
      continue;
    const std::string_view choice = element;
    bool alt = true;
    while (alt) {
      std::string_view token = take(element, '|', alt);
      if (token == "T") {
        error = "'T' in the choice '" + std::string(choice) + "'";
        return false;
      }
      if (tokenSet(token) == 0) {
        error = "unknown dtype '" + std::string(token) + "'";
        return false;
      }
    }
  }
  return true;
}

} // namespace signature_detail

/// Whether operands with these dtypes fit `signature`.
inline bool signatureMatches(std::string_view signature, DTypeList inputs,
                             DTypeList outputs) {
  size_t arrow = signature.find("->");
  if (arrow == std::string_view::npos)
    return false;
  int typeVar = -1;
  return signature_detail::matchSide(signature.substr(0, arrow), inputs,
                                     typeVar) &&
         signature_detail::matchSide(signature.substr(arrow + 2), outputs,
                                     typeVar);
}

/// Whether `signature` is well formed; otherwise one line in `error`.
inline bool checkSignature(std::string_view signature, std::string &error) {
  size_t arrow = signature.find("->");
  if (arrow == std::string_view::npos) {
    error = "no '->'";
    return false;
  }
  return signature_detail::checkSide(signature.substr(0, arrow), error) &&
         signature_detail::checkSide(signature.substr(arrow + 2), error);
}

/// The dtypes of an instruction in signature notation, "bf16,bf16->f32".
inline std::string dtypeSignature(DTypeList inputs, DTypeList outputs) {
  std::string s;
  auto side = [&](DTypeList ts) {
    for (size_t i = 0; i < ts.size; ++i)
      s.append(i ? "," : "").append(dtypeName(ts.data[i]));
  };
  side(inputs);
  s += "->";
  side(outputs);
  return s;
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_KERNELS_KERNELSIGNATURE_H
