//===- NpyFile.h - the header of a NumPy .npy array file --------*- C++ -*-===//
//
// A .npy file (numpy.save; NumPy's "NPY format" document, NEP 1) is a magic
// string, a version, a header length and a Python dict literal with the
// array's dtype ('descr'), memory order ('fortran_order') and shape, then
// the raw elements. dsrun reads token arrays from it: integer dtypes only,
// little-endian, in C order (or one-dimensional). The header is a few
// dozen bytes of fixed form; no Debian package reads it from C++, so it is
// parsed here.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_DATA_NPYFILE_H
#define DSC_RUNTIME_DATA_NPYFILE_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// An array of integers in a .npy file.
struct NpyArray {
  std::string descr;  ///< as written: '<u2', '<i8', '|u1', ...
  unsigned width = 0; ///< bytes per element: 1, 2, 4 or 8
  bool isSigned = false;
  std::vector<uint64_t> shape; ///< () is one element
  uint64_t count = 0;          ///< elements
  uint64_t offset = 0;         ///< where the elements start in the file
};

/// Reads the header of the `size` bytes at `data` (a whole .npy file) into
/// `out`. False with `why` (a phrase, e.g. "dtype '<f4' is not an integer
/// type ...") when it is not a .npy file, is truncated, or holds anything
/// but little-endian integers in C order.
bool readNpyHeader(const uint8_t *data, uint64_t size, NpyArray &out,
                   std::string &why);

} // namespace dsc::rt

#endif // DSC_RUNTIME_DATA_NPYFILE_H
