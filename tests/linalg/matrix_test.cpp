#include "tessera/linalg/matrix.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "tessera/core/strings.hpp"

namespace tessera::linalg {
namespace {

const std::string kNpyDir = std::string(TESSERA_TEST_INSTANCES) + "/npy/";

void expect_has(const std::string& message, const std::string& phrase) {
  EXPECT_NE(message.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in: " << message;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh folder per test so parallel ctest runs never share files.
class NpyFiles : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(testing::TempDir()) /
           ("tessera_npy_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

bool bitwise_equal(const Matrix& a, const Matrix& b) {
  return a.rows == b.rows && a.cols == b.cols && a.values.size() == b.values.size() &&
         std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(double)) == 0;
}

TEST(RandomMatrix, SameSeedSameMatrix) {
  const Matrix first = random_matrix(17, 23, 1234);
  for (int run = 0; run < 5; ++run) EXPECT_EQ(random_matrix(17, 23, 1234), first);
  EXPECT_NE(random_matrix(17, 23, 1235), first);
  EXPECT_NE(random_matrix(17, 23, 1234, FillKind::kIntegers), first);
}

// Asking for huge pages moves a matrix's memory, never its values (small matrices: nothing asked).
TEST(Matrix, AskingForHugePagesKeepsTheValues) {
  for (std::size_t n : {std::size_t{3}, std::size_t{1024}}) {
    Matrix m = random_matrix(n, n, 77);
    const Matrix before = m;
    prefer_huge_pages(m);
    EXPECT_TRUE(bitwise_equal(m, before)) << n;
  }
}

// Golden values pin the mapping, so every platform and compiler produces the same inputs:
// std::mt19937_64 is fully specified by the standard and the mapping is our own arithmetic.
TEST(RandomMatrix, GoldenValues) {
  const Matrix uniform = random_matrix(2, 2, 42);
  EXPECT_EQ(uniform.at(0, 0), 0x1.05477df5bb978p-1);
  EXPECT_EQ(uniform.at(0, 1), 0x1.1cbc7dcdc928p-2);
  EXPECT_EQ(uniform.at(1, 0), 0x1.023259fc3979ep-1);
  EXPECT_EQ(uniform.at(1, 1), -0x1.7474ef01d794cp-1);
  const Matrix integers = random_matrix(2, 3, 42, FillKind::kIntegers);
  EXPECT_EQ(integers.values, (std::vector<double>{-1, 6, -8, -5, -5, 7}));
}

TEST(RandomMatrix, UniformRange) {
  const Matrix m = random_matrix(200, 300, 99);
  ASSERT_EQ(m.values.size(), 60000u);
  double sum = 0;
  for (double v : m.values) {
    ASSERT_GE(v, -1.0);
    ASSERT_LT(v, 1.0);
    sum += v;
  }
  EXPECT_LT(std::abs(sum / 60000.0), 0.02);
}

TEST(RandomMatrix, IntegerRange) {
  const Matrix m = random_matrix(100, 100, 5, FillKind::kIntegers);
  std::set<double> seen;
  for (double v : m.values) {
    ASSERT_EQ(v, std::trunc(v));
    ASSERT_GE(v, -8.0);
    ASSERT_LE(v, 8.0);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 17u);  // every integer in [-8, 8] shows up
}

TEST(RandomMatrix, EmptyShapes) {
  EXPECT_EQ(random_matrix(0, 5, 1).values.size(), 0u);
  EXPECT_EQ(random_matrix(5, 0, 1).values.size(), 0u);
}

TEST_F(NpyFiles, RoundTrip) {
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{1, 1}, {2, 3}, {7, 13}, {64, 1}, {0, 4}, {3, 0}}) {
    const Matrix original = random_matrix(rows, cols, rows * 31 + cols);
    const std::string file = path("m.npy");
    ASSERT_TRUE(write_npy(file, original).is_ok());
    auto loaded = read_npy(file);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    EXPECT_EQ(*loaded, original) << rows << "x" << cols;
    // numpy's alignment rule: data starts on a 64-byte boundary.
    const std::string bytes = read_bytes(file);
    EXPECT_EQ((bytes.size() - rows * cols * sizeof(double)) % 64, 0u);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    EXPECT_EQ(bytes[bytes.size() - rows * cols * sizeof(double) - 1], '\n');
  }
}

TEST_F(NpyFiles, RoundTripIsBitExactForSpecialValues) {
  Matrix special(2, 4);
  special.values = {-0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                    std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::denorm_min(),
                    std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(), 1.0 / 3.0};
  ASSERT_TRUE(write_npy(path("s.npy"), special).is_ok());
  auto loaded = read_npy(path("s.npy"));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_TRUE(bitwise_equal(*loaded, special));
}

TEST_F(NpyFiles, WriteMatchesStoredInstance) {
  // The stored file was written byte by byte to numpy's layout; our writer must agree exactly.
  Matrix m(2, 3);
  m.values = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(write_npy(path("w.npy"), m).is_ok());
  EXPECT_EQ(read_bytes(path("w.npy")), read_bytes(kNpyDir + "good-v1.npy"));
}

TEST(ReadNpy, StoredGoodInstances) {
  for (const char* name : {"good-v1.npy", "good-v2.npy", "good-v3.npy", "good-odd-spacing.npy"}) {
    auto m = read_npy(kNpyDir + name);
    ASSERT_TRUE(m.is_ok()) << name << ": " << m.status().to_string();
    EXPECT_EQ(m->rows, 2u) << name;
    EXPECT_EQ(m->cols, 3u) << name;
    EXPECT_EQ(m->values, (std::vector<double>{1, 2, 3, 4, 5, 6})) << name;
  }
}

struct BrokenNpy {
  std::string file;
  std::vector<std::string> phrases;
};

class BrokenNpyFile : public testing::TestWithParam<BrokenNpy> {};

TEST_P(BrokenNpyFile, RefusedWithPathAndFix) {
  const std::string file = kNpyDir + GetParam().file;
  ASSERT_TRUE(std::filesystem::exists(file)) << file;
  auto m = read_npy(file);
  ASSERT_FALSE(m.is_ok()) << file << " was accepted";
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << m.status().to_string();
  EXPECT_EQ(m.status().message().rfind(file + ": ", 0), 0u) << m.status().message();
  for (const std::string& phrase : GetParam().phrases) expect_has(m.status().message(), phrase);
}

INSTANTIATE_TEST_SUITE_P(
    Instances, BrokenNpyFile,
    testing::Values(
        BrokenNpy{"float32.npy", {"'<f4'", "float32", "np.save(path, a.astype('<f8'))"}},
        BrokenNpy{"int64.npy", {"'<i8'", "int64", "np.save(path, a.astype('<f8'))"}},
        BrokenNpy{"big-endian.npy", {"'>f8'", "float64, big-endian", "np.save(path, a.astype('<f8'))"}},
        BrokenNpy{"structured.npy", {"structured", "np.save(path, a.astype('<f8'))"}},
        BrokenNpy{"fortran.npy", {"fortran_order is True", "np.ascontiguousarray"}},
        BrokenNpy{"one-d.npy", {"shape (6,) is 1-D", "reshape"}},
        BrokenNpy{"three-d.npy", {"shape (1, 2, 3) is 3-D", "reshape"}},
        BrokenNpy{"scalar.npy", {"shape () is 0-D", "reshape"}},
        BrokenNpy{"truncated-data.npy", {"needs 48 bytes of data but the file has 40", "truncated"}},
        BrokenNpy{"extra-data.npy", {"needs 48 bytes of data but the file has 56", "8 extra"}},
        BrokenNpy{"bad-magic.npy", {"not a .npy file", "bad magic"}},
        BrokenNpy{"bad-version.npy", {"version 4.0", "1.0, 2.0 and 3.0"}},
        BrokenNpy{"absurd-header.npy", {"header length 4294967280 bytes is absurd"}},
        BrokenNpy{"truncated-header.npy", {"file ends inside the header", "truncated"}},
        BrokenNpy{"truncated-prefix.npy", {"too short", "truncated"}},
        BrokenNpy{"huge-shape.npy", {"shape (1099511627776, 1) needs 8796093022208 bytes", "truncated"}},
        BrokenNpy{"overflow-shape.npy", {"too large", "corrupt"}},
        BrokenNpy{"malformed-header.npy", {"malformed header", "expected"}},
        BrokenNpy{"unknown-key.npy", {"unknown key 'extra'"}}),
    [](const testing::TestParamInfo<BrokenNpy>& param_info) {
      std::string name = param_info.param.file.substr(0, param_info.param.file.find('.'));
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// Cutting a valid file anywhere must give a clean refusal, never a crash or a partial matrix.
TEST_F(NpyFiles, EveryTruncationIsRefused) {
  ASSERT_TRUE(write_npy(path("full.npy"), random_matrix(3, 5, 8)).is_ok());
  const std::string bytes = read_bytes(path("full.npy"));
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    const std::string file = path("cut.npy");
    write_bytes(file, bytes.substr(0, length));
    auto m = read_npy(file);
    ASSERT_FALSE(m.is_ok()) << "accepted a file cut to " << length << " bytes";
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    expect_has(m.status().message(), file);
  }
}

// Flipping header bytes must never crash or allocate wildly; any outcome but a crash is fine.
TEST_F(NpyFiles, CorruptHeaderBytesNeverCrash) {
  ASSERT_TRUE(write_npy(path("full.npy"), random_matrix(4, 4, 3)).is_ok());
  const std::string bytes = read_bytes(path("full.npy"));
  const std::string replacements = "0123456789(),:' {}\x00\xff";
  for (std::size_t at = 0; at < 128; ++at) {
    for (char replacement : replacements) {
      std::string mangled = bytes;
      mangled[at] = replacement;
      write_bytes(path("bad.npy"), mangled);
      auto m = read_npy(path("bad.npy"));
      if (m.is_ok()) {
        EXPECT_EQ(m->values.size(), m->rows * m->cols);
      }
    }
  }
}

// hostile-descr.npy and hostile-shape.npy (make_npy_instances.py) put an ESC ] title sequence, a
// BEL, a NUL, 0x91 (not UTF-8) and an ESC [ clear-screen into the header's descr and shape.
TEST(ReadNpy, HostileHeaderBytesAreQuotedEscaped) {
  for (const auto& [name, phrase] : std::vector<std::pair<std::string, std::string>>{
           {"hostile-descr.npy", "dtype '<f8\\x1b]0;PWNED\\x07\\x00\\x91\\x1b[2J'"},
           {"hostile-shape.npy", "'shape': (2, \\x1b]0;PWNED\\x07\\x00\\x91\\x1b[2J)"}}) {
    SCOPED_TRACE(name);
    auto m = read_npy(kNpyDir + name);
    ASSERT_FALSE(m.is_ok());
    const std::string message = m.status().message();
    EXPECT_EQ(message.rfind(kNpyDir + name + ": ", 0), 0u) << message;
    expect_has(message, phrase);
    for (const char raw : {'\x1b', '\x07', '\0', '\x91'}) EXPECT_EQ(message.find(raw), std::string::npos) << message;
    EXPECT_EQ(printable_message(message), message);
  }
}

TEST(ReadNpy, MissingFileIsIoErrorNamingPath) {
  const std::string file = kNpyDir + "does-not-exist.npy";
  auto m = read_npy(file);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIoError);
  expect_has(m.status().message(), file);
}

TEST_F(NpyFiles, WriteFailures) {
  const std::string unwritable = path("no/such/folder/m.npy");
  Status status = write_npy(unwritable, random_matrix(2, 2, 1));
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  expect_has(status.message(), unwritable);

  Matrix inconsistent(2, 2);
  inconsistent.values.pop_back();
  status = write_npy(path("m.npy"), inconsistent);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  expect_has(status.message(), "holds 3 values");
}

}  // namespace
}  // namespace tessera::linalg
