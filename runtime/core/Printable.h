//===- Printable.h - bytes from a file, safe to put in a message -*- C++
//-*-===//
//
// Names read from input files (tensor names in a safetensors header, a
// plan's identifier) go into one-line error messages: anything but
// printable ASCII, and the quote and backslash, is written as \xNN, so a
// name with a newline cannot split the line. Header-only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_PRINTABLE_H
#define DSC_RUNTIME_CORE_PRINTABLE_H

#include <string>
#include <string_view>

namespace dsc {

/// `bytes` escaped as above, cut to `limit` bytes ("..." after).
inline std::string printable(std::string_view bytes, size_t limit = 80) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == limit)
      return out + "...";
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += char(c);
    } else {
      static const char *kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_PRINTABLE_H
