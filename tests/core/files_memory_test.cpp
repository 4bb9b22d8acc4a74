// Bounded reads of user-named files and the memory check that refuses oversized inputs.
#include "tessera/core/files.hpp"
#include "tessera/core/memory.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

class BoundedFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessera-files-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& content) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(BoundedFiles, RegularFileIsReadWhole) {
  Result<std::string> text = read_regular_file(write("a.txt", "hello\n"), 6, "test file");
  ASSERT_TRUE(text.is_ok()) << text.status().to_string();
  EXPECT_EQ(*text, "hello\n");
}

TEST_F(BoundedFiles, OneByteOverTheCapIsRefused) {
  const std::string path = write("big.txt", std::string(4097, 'x'));
  Result<std::string> text = read_regular_file(path, 4096, "secret file");
  ASSERT_FALSE(text.is_ok());
  EXPECT_EQ(text.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(text.status().message().find("larger than 4 KiB"), std::string::npos) << text.status().message();
  EXPECT_TRUE(read_regular_file(write("cap.txt", std::string(4096, 'x')), 4096, "secret file").is_ok());
}

TEST_F(BoundedFiles, SpecialFilesAreRefusedByWhatTheyAre) {
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  struct Case {
    std::string path, kind;
  };
  for (const Case& special : {Case{"/dev/zero", "a character device"}, Case{fifo, "a FIFO"},
                              Case{dir_.string(), "a directory"}}) {
    Result<std::string> text = read_regular_file(special.path, 1 << 20, "cluster file");
    ASSERT_FALSE(text.is_ok()) << special.path;
    EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(text.status().message().find("cluster file '" + special.path + "' is " + special.kind),
              std::string::npos)
        << text.status().message();
    EXPECT_FALSE(regular_file_size(special.path, "cluster file").is_ok());
  }
  // Opening a FIFO without a writer must not wait for one.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(BoundedFiles, MissingFileIsAnIoErrorNamingIt) {
  Result<std::string> text = read_regular_file((dir_ / "absent").string(), 10, "secret file");
  ASSERT_FALSE(text.is_ok());
  EXPECT_EQ(text.status().code(), StatusCode::kIoError);
  EXPECT_NE(text.status().message().find("cannot open secret file"), std::string::npos);
  EXPECT_NE(text.status().message().find("check the path"), std::string::npos);
}

TEST(Memory, BytesAreFormattedInBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(uint64_t{200000} * 200000 * 8), "298 GiB");
  EXPECT_EQ(format_bytes(uint64_t{23} << 30), "23 GiB");
}

TEST(Memory, SaturatesInsteadOfWrapping) {
  EXPECT_EQ(saturating_bytes(3, 4, 8), 96u);
  EXPECT_EQ(saturating_bytes(uint64_t{1} << 40, uint64_t{1} << 40, 8), UINT64_MAX);
  EXPECT_EQ(saturating_bytes(uint64_t{1} << 62, 1, 8), UINT64_MAX);
}

TEST(Memory, WhatCannotFitIsRefusedNamingBothSizes) {
  ASSERT_GT(available_memory_bytes(), 0u) << "Linux reports MemAvailable";
  EXPECT_TRUE(check_fits_in_memory(1 << 20, "a small thing").is_ok());
  const Status huge = check_fits_in_memory(UINT64_MAX / 2, "A 2000000000x2000000000", "; use a smaller --n");
  ASSERT_FALSE(huge.is_ok());
  EXPECT_EQ(huge.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(huge.message().find("A 2000000000x2000000000 needs 8 EiB; this machine has "), std::string::npos)
      << huge.message();
  EXPECT_NE(huge.message().find(" available; use a smaller --n"), std::string::npos) << huge.message();
}

}  // namespace
}  // namespace tessera
