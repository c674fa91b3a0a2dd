// Reading and writing NumPy .npy files (format versions 1.0-3.0): little-endian, C-order arrays of
// the kiln dtypes. `kiln run` uses it for inputs and outputs besides ONNX .pb files. It depends on
// kiln.h only, so the same reader serves any tool that talks to libkiln.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::tools {

struct NpyArray {
  kiln_dtype dtype = KILN_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
  std::string bytes;  // the elements, C order, little-endian
};

// Reads `path`; throws kiln::UserError naming the file and what is wrong: not an .npy file, a
// Fortran-order or big-endian array, a dtype kiln has no equivalent for, or a truncated body.
NpyArray read_npy_file(const std::string& path);
// The same for the bytes of an .npy file in memory; `name` stands for the path in the errors.
NpyArray parse_npy(const std::string& data, const std::string& name);

// Writes `array` as a version 1.0 .npy file (throws kiln::UserError when the file cannot be written).
void write_npy_file(const std::string& path, const NpyArray& array);

// The NumPy descr ("<f4", "|b1", ...) of a kiln dtype; bfloat16, which NumPy lacks, is written as
// its raw bits ("<u2").
std::string npy_descr(kiln_dtype dtype);

}  // namespace kiln::tools
