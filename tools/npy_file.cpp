// The .npy format (numpy.lib.format): a magic string, a version, a header length, a Python dict
// literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded so the data starts on a
// 64-byte boundary, then the raw elements. Only what kiln's dtypes need is parsed.
#include "npy_file.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/error.h"

namespace kiln::tools {
namespace {

static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";

struct DescrName {
  kiln_dtype dtype;
  const char* descr;
};
// One descr per dtype for writing; the reader also accepts '=' and '|' byte-order marks.
constexpr DescrName kDescrs[] = {
    {KILN_DTYPE_BOOL, "|b1"},    {KILN_DTYPE_INT8, "|i1"},    {KILN_DTYPE_UINT8, "|u1"},
    {KILN_DTYPE_INT16, "<i2"},   {KILN_DTYPE_UINT16, "<u2"},  {KILN_DTYPE_INT32, "<i4"},
    {KILN_DTYPE_UINT32, "<u4"},  {KILN_DTYPE_INT64, "<i8"},   {KILN_DTYPE_UINT64, "<u8"},
    {KILN_DTYPE_FLOAT16, "<f2"}, {KILN_DTYPE_FLOAT32, "<f4"}, {KILN_DTYPE_FLOAT64, "<f8"},
};

// The value of `key` in the header dict, as written: a quoted string, True/False or a tuple.
std::string header_value(const std::string& header, const std::string& key, const std::string& path) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw UserError(str_cat("'", path, "': .npy header has no '", key, "'"));
  at = header.find(':', at);
  if (at == std::string::npos) throw UserError(str_cat("'", path, "': malformed .npy header"));
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  if (at >= header.size()) throw UserError(str_cat("'", path, "': malformed .npy header"));
  char open = header[at];
  size_t end;
  if (open == '\'' || open == '"') end = header.find(open, at + 1);
  else if (open == '(') end = header.find(')', at);
  else end = header.find_first_of(",}", at) - 1;
  if (end == std::string::npos || end < at) throw UserError(str_cat("'", path, "': malformed .npy header"));
  return header.substr(at, end - at + 1);
}

kiln_dtype dtype_of_descr(std::string descr, const std::string& path) {
  std::string quoted = descr;
  descr = descr.substr(1, descr.size() - 2);  // drop the quotes
  if (descr.size() >= 2 && (descr[0] == '=' || descr[0] == '|')) descr[0] = '<';
  if (descr == "<b1" || descr == "<i1" || descr == "<u1") descr[0] = '|';
  for (const DescrName& entry : kDescrs)
    if (descr == entry.descr) return entry.dtype;
  if (!descr.empty() && descr[0] == '>')
    throw UserError(str_cat("'", path, "': big-endian .npy arrays are not supported (descr ", quoted, ")"));
  throw UserError(str_cat("'", path, "': .npy dtype ", quoted, " has no kiln equivalent"));
}

std::vector<int64_t> parse_shape(const std::string& tuple, const std::string& path) {
  std::vector<int64_t> shape;
  std::string inner = tuple.substr(1, tuple.size() - 2);
  std::istringstream items(inner);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;  // the trailing comma of a 1-tuple
    char* end = nullptr;
    long long value = std::strtoll(item.c_str() + first, &end, 10);
    if (end == item.c_str() + first || value < 0)
      throw UserError(str_cat("'", path, "': bad .npy shape ", tuple));
    shape.push_back(value);
  }
  return shape;
}

}  // namespace

std::string npy_descr(kiln_dtype dtype) {
  if (dtype == KILN_DTYPE_BFLOAT16) return "<u2";
  for (const DescrName& entry : kDescrs)
    if (entry.dtype == dtype) return entry.descr;
  throw UserError(str_cat("no .npy dtype for kiln dtype ", static_cast<int>(dtype)));
}

NpyArray read_npy_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw UserError(str_cat("cannot open '", path, "'"));
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return parse_npy(buffer.str(), path);
}

NpyArray parse_npy(const std::string& data, const std::string& path) {
  if (data.size() < 10 || data.compare(0, 6, kMagic) != 0)
    throw UserError(str_cat("'", path, "' is not an .npy file (no \\x93NUMPY magic)"));
  unsigned major = static_cast<unsigned char>(data[6]);
  size_t header_length, header_start;
  if (major == 1) {
    header_length = static_cast<unsigned char>(data[8]) | (static_cast<size_t>(static_cast<unsigned char>(data[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) throw UserError(str_cat("'", path, "': truncated .npy header"));
    header_length = 0;
    for (int i = 3; i >= 0; --i) header_length = (header_length << 8) | static_cast<unsigned char>(data[8 + i]);
    header_start = 12;
  } else {
    throw UserError(str_cat("'", path, "': .npy format version ", major, " is not supported (1 to 3 are)"));
  }
  if (data.size() < header_start + header_length) throw UserError(str_cat("'", path, "': truncated .npy header"));
  std::string header = data.substr(header_start, header_length);
  NpyArray array;
  array.dtype = dtype_of_descr(header_value(header, "descr", path), path);
  std::string fortran = header_value(header, "fortran_order", path);
  array.shape = parse_shape(header_value(header, "shape", path), path);
  // The byte count must not wrap: a shape whose product overflows would otherwise pass as a short body.
  size_t body = kiln_dtype_size(array.dtype);
  for (int64_t size : array.shape)
    if (__builtin_mul_overflow(body, static_cast<size_t>(size), &body))
      throw UserError(str_cat("'", path, "': .npy shape ", header_value(header, "shape", path), " is too large"));
  if (fortran.rfind("True", 0) == 0 && array.shape.size() > 1)
    throw UserError(str_cat("'", path, "': Fortran-order .npy arrays are not supported (save a C-order copy)"));
  size_t data_start = header_start + header_length;
  if (data.size() - data_start < body)
    throw UserError(str_cat("'", path, "': truncated .npy data (", data.size() - data_start, " bytes, ", body,
                            " expected)"));
  array.bytes = data.substr(data_start, body);
  return array;
}

void write_npy_file(const std::string& path, const NpyArray& array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) shape += str_cat(array.shape[i], ", ");
  if (array.shape.size() > 1) shape.resize(shape.size() - 2);
  else if (array.shape.size() == 1) shape.resize(shape.size() - 1);  // "(3,)"
  shape += ")";
  std::string header =
      str_cat("{'descr': '", npy_descr(array.dtype), "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces and end with '\n' so that magic + version + length + header is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) throw UserError(str_cat("cannot write '", path, "': .npy header too long"));
  std::string prefix(kMagic, 6);
  prefix += '\x01';
  prefix += '\x00';
  prefix += static_cast<char>(header.size() & 0xff);
  prefix += static_cast<char>(header.size() >> 8);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << prefix << header;
  out.write(array.bytes.data(), static_cast<std::streamsize>(array.bytes.size()));
  out.close();
  if (!out) throw UserError(str_cat("cannot write '", path, "'"));
}

}  // namespace kiln::tools
