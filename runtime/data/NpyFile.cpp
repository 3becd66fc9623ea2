//===- NpyFile.cpp - the header of a NumPy .npy array file ----------------===//
#include "runtime/data/NpyFile.h"

#include <cstring>
#include <string_view>

namespace dsc::rt {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

/// The text after `'key':` in the header dict, spaces skipped; "" when the
/// key is absent.
std::string_view valueOf(std::string_view dict, std::string_view key) {
  const std::string quoted = "'" + std::string(key) + "'";
  size_t at = dict.find(quoted);
  if (at == std::string_view::npos)
    return {};
  at = dict.find(':', at + quoted.size());
  if (at == std::string_view::npos)
    return {};
  at = dict.find_first_not_of(' ', at + 1);
  return at == std::string_view::npos ? std::string_view{} : dict.substr(at);
}

/// 'descr': a quoted string such as '<u2'.
bool readDescr(std::string_view dict, NpyArray &out, std::string &why) {
  std::string_view v = valueOf(dict, "descr");
  size_t end = v.size() > 1 && v[0] == '\'' ? v.find('\'', 1) : 0;
  if (end == 0 || end == std::string_view::npos) {
    why = "the header has no 'descr' string";
    return false;
  }
  out.descr = std::string(v.substr(1, end - 1));
  const std::string_view d = out.descr;
  // '<' little-endian, '|' not applicable (one byte); '=' native, which is
  // little-endian on every machine dsrun runs on.
  const bool little =
      d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=');
  const bool integer = d.size() == 3 && (d[1] == 'u' || d[1] == 'i');
  const unsigned width = d.size() == 3 ? unsigned(d[2] - '0') : 0;
  if (!little || !integer ||
      (width != 1 && width != 2 && width != 4 && width != 8)) {
    why = "dtype '" + out.descr +
          "' is not a token type (little-endian integers: uint8, uint16, "
          "uint32, uint64, int8, int16, int32 or int64)";
    return false;
  }
  out.width = width;
  out.isSigned = d[1] == 'i';
  return true;
}

/// 'shape': a tuple of integers, "()" for a scalar.
bool readShape(std::string_view dict, NpyArray &out, std::string &why) {
  std::string_view v = valueOf(dict, "shape");
  size_t close = v.find(')');
  if (v.empty() || v[0] != '(' || close == std::string_view::npos) {
    why = "the header has no 'shape' tuple";
    return false;
  }
  out.shape.clear();
  out.count = 1;
  std::string_view dims = v.substr(1, close - 1);
  while (!dims.empty()) {
    size_t start = dims.find_first_not_of(" ,");
    if (start == std::string_view::npos)
      break;
    dims.remove_prefix(start);
    uint64_t n = 0;
    size_t digits = 0;
    while (digits < dims.size() && dims[digits] >= '0' && dims[digits] <= '9' &&
           n <= (UINT64_MAX - 9) / 10)
      n = n * 10 + uint64_t(dims[digits++] - '0');
    if (digits == 0 || (digits < dims.size() && dims[digits] != ',' &&
                        dims[digits] != ' ' && dims[digits] != 'L')) {
      why = "the header's 'shape' is not a tuple of integers";
      return false;
    }
    out.shape.push_back(n);
    out.count = n && out.count > UINT64_MAX / n ? UINT64_MAX : out.count * n;
    dims.remove_prefix(digits);
  }
  return true;
}

} // namespace

bool readNpyHeader(const uint8_t *data, uint64_t size, NpyArray &out,
                   std::string &why) {
  if (size < kMagicSize + 4 || std::memcmp(data, kMagic, kMagicSize) != 0) {
    why = "not a .npy file (it does not start with NumPy's magic string)";
    return false;
  }
  const unsigned major = data[6];
  uint64_t headerSize = 0, start = 0;
  if (major == 1) {
    headerSize = uint64_t(data[8]) | uint64_t(data[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      why = "the header is cut short";
      return false;
    }
    for (int b = 0; b < 4; ++b)
      headerSize |= uint64_t(data[8 + b]) << (8 * b);
    start = 12;
  } else {
    why = ".npy format version " + std::to_string(major) +
          " (dsrun reads versions 1 to 3)";
    return false;
  }
  if (start + headerSize > size) {
    why = "the header is cut short";
    return false;
  }
  const std::string_view dict(reinterpret_cast<const char *>(data + start),
                              headerSize);
  if (!readDescr(dict, out, why) || !readShape(dict, out, why))
    return false;
  if (valueOf(dict, "fortran_order").substr(0, 4) == "True" &&
      out.shape.size() > 1) {
    why = "the array is in Fortran order; save a C-ordered one "
          "(numpy.ascontiguousarray)";
    return false;
  }
  out.offset = start + headerSize;
  const uint64_t room = (size - out.offset) / out.width;
  if (out.count > room) {
    why = "the header says " + std::to_string(out.count) + " elements of " +
          std::to_string(out.width) + " bytes, but the file holds " +
          std::to_string(room);
    return false;
  }
  return true;
}

} // namespace dsc::rt
