#include "tessera/linalg/matrix.hpp"

#include "tessera/core/files.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/strings.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <utility>

#include <sys/mman.h>

namespace tessera::linalg {
namespace {

// .npy layout (numpy/lib/format.py): magic, major, minor, little-endian header length (uint16 for
// 1.0, uint32 for 2.0/3.0), an ASCII Python dict literal padded with spaces, then the raw data.
constexpr std::array<char, 6> kMagic = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kDataAlignment = 64;
// numpy itself refuses headers above 10 000 bytes unless told otherwise; a 2-D float64 header is
// under 128 bytes, so anything past 1 MiB is a corrupt length field, not a real header.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 20;
constexpr const char* kFixDtype = "np.save(path, a.astype('<f8'))";

static_assert(std::numeric_limits<double>::is_iec559, "the .npy '<f8' format is IEEE 754 binary64");

// Thrown inside this file only; read_npy turns it into a Status naming the path.
struct NpyError {
  std::string message;
  bool out_of_memory = false;  // the file is sound but larger than this machine's free memory
};

[[noreturn]] void fail(std::string message) { throw NpyError{std::move(message)}; }

// "A 200000x200000 matrix" for memory messages.
std::string fmt_shape(uint64_t rows, uint64_t cols) {
  return "a " + std::to_string(rows) + "x" + std::to_string(cols) + " matrix";
}

// Doubles travel little-endian; only a big-endian host has anything to do.
void to_or_from_little_endian(double* values, std::size_t count) {
  if constexpr (std::endian::native == std::endian::big) {
    for (std::size_t i = 0; i < count; ++i) {
      uint64_t bits = 0;
      std::memcpy(&bits, &values[i], sizeof bits);
      bits = __builtin_bswap64(bits);
      std::memcpy(&values[i], &bits, sizeof bits);
    }
  } else {
    (void)values;
    (void)count;
  }
}

// "float32", "int64, big-endian", ... for a numpy type string such as '<f4' or '>i8'.
std::string describe_dtype(const std::string& descr) {
  if (descr.size() < 2) return "unknown";
  const char order = descr[0];
  const char kind = descr[1];
  const std::string size = descr.substr(2);
  static const std::map<char, std::string> kKinds = {
      {'f', "float"}, {'i', "int"},   {'u', "uint"},    {'c', "complex"},   {'b', "bool"},   {'U', "unicode string"},
      {'S', "bytes"}, {'O', "object"}, {'M', "datetime"}, {'m', "timedelta"}, {'V', "void"}};
  const auto kind_name = kKinds.find(kind);
  if (kind_name == kKinds.end() || (order != '<' && order != '>' && order != '|' && order != '=')) {
    return "unknown";
  }
  std::string name = kind_name->second;
  const bool numeric = kind == 'f' || kind == 'i' || kind == 'u' || kind == 'c';
  const bool digits = !size.empty() && size.size() <= 3 &&
                      std::all_of(size.begin(), size.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (numeric && digits) {
    name += std::to_string(std::stoul(size) * 8);
  }
  if (order == '>') name += ", big-endian";
  return name;
}

// A strict reader for the one dict literal numpy writes: {'descr': ..., 'fortran_order': ...,
// 'shape': (...), } with any whitespace between tokens.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<uint64_t> shape;
  };

  Header parse() {
    Header header;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string("a quoted key");
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek() != '\'' && peek() != '"') {
          fail("dtype is structured or not a plain type string; Tessera needs float64: " + std::string(kFixDtype));
        }
        header.descr = parse_string("the dtype string");
        seen_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = parse_bool();
        seen_fortran = true;
      } else if (key == "shape") {
        header.shape = parse_shape();
        seen_shape = true;
      } else {
        fail("header has unknown key '" + printable(key) + "'; expected only descr, fortran_order and shape");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail_at("',' or '}'");
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail_at("the end of the header");
    if (!seen_descr || !seen_fortran || !seen_shape) {
      fail("header lacks " + std::string(!seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape") +
           "; it is not a numpy .npy header");
    }
    return header;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  [[noreturn]] void fail_at(const std::string& expected) const {
    // Show the dict without its padding, and not all of a megabyte of garbage.
    std::string shown(text_.substr(0, 200));
    while (!shown.empty() && std::isspace(static_cast<unsigned char>(shown.back()))) shown.pop_back();
    fail("malformed header at byte " + std::to_string(pos_) + ": expected " + expected + " in \"" + printable(shown) +
         (text_.size() > 200 ? "..." : "") + "\"; re-save the array with np.save(path, a)");
  }

  void expect(char c) {
    skip_space();
    if (peek() != c) fail_at(std::string("'") + c + "'");
    ++pos_;
  }

  std::string parse_string(const std::string& what) {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail_at(what);
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail_at("a closing quote");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    if (value.find('\\') != std::string::npos) fail_at(what + " without escapes");
    pos_ = end + 1;
    return value;
  }

  bool parse_bool() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::size_t length = std::strlen(word);
      if (text_.substr(pos_, length) == word) {
        pos_ += length;
        return value;
      }
    }
    fail_at("True or False");
  }

  uint64_t parse_dimension() {
    skip_space();
    const std::size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) fail("shape dimension is too large");
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail_at("a non-negative integer dimension");
    if (peek() == 'L') ++pos_;  // Python 2 numpy wrote long integers as "3L"
    return value;
  }

  std::vector<uint64_t> parse_shape() {
    expect('(');
    std::vector<uint64_t> shape;
    skip_space();
    if (peek() == ')') {
      ++pos_;
      return shape;
    }
    while (true) {
      shape.push_back(parse_dimension());
      skip_space();
      if (peek() == ')') {
        ++pos_;
        return shape;
      }
      expect(',');
      skip_space();
      if (peek() == ')') {
        ++pos_;
        return shape;
      }
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

std::string shape_text(const std::vector<uint64_t>& shape) {
  const std::string dims = join(shape, ", ", [](uint64_t dim) { return std::to_string(dim); });
  return "(" + dims + (shape.size() == 1 ? ",)" : ")");
}

uint64_t read_little_endian(const unsigned char* bytes, std::size_t count) {
  uint64_t value = 0;
  for (std::size_t i = 0; i < count; ++i) value |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return value;
}

Matrix read_npy_or_throw(std::ifstream& in, uint64_t file_size) {
  constexpr std::size_t kPrefixV1 = 10;  // magic, version, uint16 length
  constexpr std::size_t kPrefixV2 = 12;  // magic, version, uint32 length
  std::array<unsigned char, kPrefixV2> prefix{};
  if (file_size < kPrefixV1) {
    fail("file is " + std::to_string(file_size) + " bytes, too short for a .npy header; it is truncated or not .npy");
  }
  in.read(reinterpret_cast<char*>(prefix.data()), kPrefixV1);
  if (!in) fail("cannot read the .npy prefix");
  if (std::memcmp(prefix.data(), kMagic.data(), kMagic.size()) != 0) {
    fail("not a .npy file (bad magic; expected \\x93NUMPY); save the matrix with np.save(path, a)");
  }
  const unsigned major = prefix[6];
  const unsigned minor = prefix[7];
  if (minor != 0 || major < 1 || major > 3) {
    fail(".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
         " is not supported; Tessera reads 1.0, 2.0 and 3.0 (np.save writes these)");
  }
  std::size_t prefix_size = kPrefixV1;
  if (major >= 2) {
    if (file_size < kPrefixV2) fail("file ends inside the .npy prefix; it is truncated");
    in.read(reinterpret_cast<char*>(prefix.data() + kPrefixV1), kPrefixV2 - kPrefixV1);
    if (!in) fail("cannot read the .npy prefix");
    prefix_size = kPrefixV2;
  }
  const uint64_t header_length = read_little_endian(prefix.data() + 8, prefix_size - 8);
  if (header_length > kMaxHeaderBytes) {
    fail("header length " + std::to_string(header_length) + " bytes is absurd (limit " +
         std::to_string(kMaxHeaderBytes) + "); the file is corrupt or not .npy");
  }
  if (prefix_size + header_length > file_size) {
    fail("file ends inside the header (header needs " + std::to_string(header_length) + " bytes, file has " +
         std::to_string(file_size - prefix_size) + " after the prefix); it is truncated");
  }
  std::string header_text(header_length, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_length));
  if (!in) fail("cannot read the .npy header");
  const HeaderParser::Header header = HeaderParser(header_text).parse();

  if (header.descr != "<f8") {
    fail("dtype '" + printable(header.descr) + "' (" + describe_dtype(header.descr) +
         "); Tessera needs float64 little-endian '<f8': " + kFixDtype);
  }
  if (header.fortran_order) {
    fail("fortran_order is True (column-major); Tessera needs row-major: "
         "np.save(path, np.ascontiguousarray(a))");
  }
  if (header.shape.size() != 2) {
    fail("shape " + shape_text(header.shape) + " is " + std::to_string(header.shape.size()) +
         "-D; Tessera needs a 2-D matrix: np.save(path, a.reshape(rows, cols))");
  }
  const uint64_t rows = header.shape[0];
  const uint64_t cols = header.shape[1];
  // The size check comes before any allocation, so a forged shape cannot make us allocate.
  const uint64_t data_size = file_size - prefix_size - header_length;
  const uint64_t max_elements = std::numeric_limits<uint64_t>::max() / sizeof(double);
  if (cols != 0 && rows > max_elements / cols) {
    fail("shape " + shape_text(header.shape) + " is too large for any file; the header is corrupt");
  }
  const uint64_t needed = rows * cols * sizeof(double);
  if (data_size < needed) {
    fail("shape " + shape_text(header.shape) + " needs " + std::to_string(needed) + " bytes of data but the file has " +
         std::to_string(data_size) + "; it is truncated");
  }
  if (data_size > needed) {
    fail("shape " + shape_text(header.shape) + " needs " + std::to_string(needed) + " bytes of data but the file has " +
         std::to_string(data_size) + " (" + std::to_string(data_size - needed) +
         " extra); save one array per file with np.save(path, a)");
  }
  if (rows > std::numeric_limits<std::size_t>::max() || cols > std::numeric_limits<std::size_t>::max()) {
    fail("shape " + shape_text(header.shape) + " does not fit in memory on this machine");
  }

  // The file really holds this much data; whether this machine can hold it too is asked before
  // the allocation, so a 300 GiB file gets a sentence, not std::bad_alloc or the OOM killer.
  if (Status fits = check_fits_in_memory(needed, fmt_shape(rows, cols)); !fits) {
    throw NpyError{fits.message() + "; multiply smaller matrices or free memory", true};
  }
  Matrix matrix(static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  if (needed > 0) {
    in.read(reinterpret_cast<char*>(matrix.values.data()), static_cast<std::streamsize>(needed));
    if (!in) fail("cannot read the matrix data");
  }
  to_or_from_little_endian(matrix.values.data(), matrix.values.size());
  return matrix;
}

}  // namespace

Matrix random_matrix(std::size_t rows, std::size_t cols, uint64_t seed, FillKind kind) {
  Matrix matrix(rows, cols);
  std::mt19937_64 engine(seed);
  for (double& value : matrix.values) {
    const uint64_t bits = engine();
    if (kind == FillKind::kIntegers) {
      value = static_cast<double>(static_cast<int64_t>(bits % 17) - 8);
    } else {
      // The top 53 bits give every double in [0, 1) on a 2^-53 grid exactly, with no rounding
      // that could differ between platforms; then stretch to [-1, 1).
      const double unit = static_cast<double>(bits >> 11) * 0x1.0p-53;
      value = 2.0 * unit - 1.0;
    }
  }
  return matrix;
}

Result<Matrix> read_npy(const std::string& path) {
  // A FIFO, a directory or /dev/zero is refused by what it is; the size checks below need a file
  // whose size is known and fixed.
  if (Result<uint64_t> size = regular_file_size(path, ".npy file"); !size) return size.status();
  std::ifstream in(path, std::ios::binary);
  // Every message names the file as printable() shows it: a path can hold any byte.
  const std::string shown = printable(path);
  if (!in) return io_error(shown + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  in.seekg(0, std::ios::beg);
  if (end < 0 || !in) return io_error(shown + ": cannot determine the file size");
  try {
    return read_npy_or_throw(in, static_cast<uint64_t>(end));
  } catch (const NpyError& e) {
    if (e.out_of_memory) return resource_exhausted(shown + ": " + e.message);
    return invalid_argument(shown + ": " + e.message);
  } catch (const std::bad_alloc&) {
    return resource_exhausted(shown + ": not enough memory for the matrix");
  }
}

Status write_npy(const std::string& path, const Matrix& matrix) {
  if (matrix.values.size() != matrix.rows * matrix.cols) {
    return invalid_argument(path + ": matrix claims " + std::to_string(matrix.rows) + "x" +
                            std::to_string(matrix.cols) + " but holds " + std::to_string(matrix.values.size()) +
                            " values; not writing");
  }
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(matrix.rows) + ", " +
                       std::to_string(matrix.cols) + "), }";
  // Pad with spaces and end with '\n' so the data starts on a 64-byte boundary, as numpy does;
  // that lets a reader map the file and use the data in place.
  constexpr std::size_t kPrefix = 10;
  const std::size_t unpadded = kPrefix + header.size() + 1;
  header.append((kDataAlignment - unpadded % kDataAlignment) % kDataAlignment, ' ');
  header += '\n';

  std::string prefix(kMagic.begin(), kMagic.end());
  prefix += '\x01';
  prefix += '\x00';
  prefix += static_cast<char>(header.size() & 0xff);
  prefix += static_cast<char>((header.size() >> 8) & 0xff);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error(path + ": cannot create: " + std::strerror(errno));
  out.write(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if constexpr (std::endian::native == std::endian::little) {
    out.write(reinterpret_cast<const char*>(matrix.values.data()),
              static_cast<std::streamsize>(matrix.values.size() * sizeof(double)));
  } else {
    std::vector<double> little(matrix.values);
    to_or_from_little_endian(little.data(), little.size());
    out.write(reinterpret_cast<const char*>(little.data()), static_cast<std::streamsize>(little.size() * sizeof(double)));
  }
  out.close();
  if (!out) return io_error(path + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

void MutableMatrixView::fill(double value) const {
  for (std::size_t r = 0; r < rows; ++r) std::fill_n(row(r), cols, value);
}

Matrix to_matrix(MatrixView view) {
  Matrix matrix(view.rows, view.cols);
  for (std::size_t r = 0; r < view.rows; ++r) std::copy_n(view.row(r), view.cols, matrix.row(r));
  return matrix;
}

void prefer_huge_pages(Matrix& m) {
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; older headers lack the name
#endif
  const auto start = reinterpret_cast<std::uintptr_t>(m.values.data());
  const std::uintptr_t begin = (start + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t end = (start + m.values.size() * sizeof(double)) & ~(kHugePage - 1);
  if (end <= begin) return;
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_COLLAPSE);
}

}  // namespace tessera::linalg
