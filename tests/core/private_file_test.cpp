#include "tessera/core/files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessera {
namespace {

namespace fs = std::filesystem;

class PrivateFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tessera-private-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string read(const std::string& path) {
    std::ifstream file(path);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  }
  static unsigned mode_of(const std::string& path) {
    struct stat info {};
    return ::lstat(path.c_str(), &info) == 0 ? info.st_mode & 07777 : 0;
  }

  std::string dir_;
};

TEST_F(PrivateFile, CreatesWithMode0600WhateverTheUmask) {
  const mode_t old_umask = ::umask(0);
  const std::string path = dir_ + "/secret";
  const Status written = write_private_file(path, "abc\n", PrivateWrite::kCreateNew, "secret file");
  ::umask(old_umask);
  ASSERT_TRUE(written.is_ok()) << written.message();
  EXPECT_EQ(read(path), "abc\n");
  EXPECT_EQ(mode_of(path), 0600u);
}

TEST_F(PrivateFile, CreateNewRefusesAnythingAlreadyThere) {
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "old";
  const std::string link = dir_ + "/link";
  ASSERT_EQ(::symlink((dir_ + "/nowhere").c_str(), link.c_str()), 0);
  for (const auto& [path, kind] : {std::pair{file, "a regular file"}, std::pair{link, "a symbolic link"},
                                   std::pair{dir_, "a directory"}}) {
    const Status refused = write_private_file(path, "new", PrivateWrite::kCreateNew, "secret file");
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << path;
    EXPECT_NE(refused.message().find("already exists"), std::string::npos) << refused.message();
    EXPECT_NE(refused.message().find(kind), std::string::npos) << refused.message();
    EXPECT_NE(refused.message().find(path), std::string::npos) << refused.message();
  }
  EXPECT_EQ(read(file), "old");
  EXPECT_FALSE(fs::exists(dir_ + "/nowhere")) << "wrote through a dangling link";
}

TEST_F(PrivateFile, ReplaceSwapsTheFileAndNeverWritesThroughALink) {
  const std::string path = dir_ + "/secret";
  std::ofstream(path) << "old";
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  ASSERT_TRUE(write_private_file(path, "new", PrivateWrite::kReplace, "secret file").is_ok());
  EXPECT_EQ(read(path), "new");
  EXPECT_EQ(mode_of(path), 0600u);

  const std::string target = dir_ + "/target";
  std::ofstream(target) << "target";
  const std::string link = dir_ + "/link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(write_private_file(link, "new", PrivateWrite::kReplace, "secret file").is_ok());
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_EQ(read(link), "new");
  EXPECT_EQ(read(target), "target");
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 3u) << "a temporary file was left behind";
}

TEST_F(PrivateFile, MissingFolderIsAnIoErrorNamingIt) {
  const std::string path = dir_ + "/missing/secret";
  const Status failed = write_private_file(path, "x", PrivateWrite::kCreateNew, "secret file");
  EXPECT_EQ(failed.code(), StatusCode::kIoError);
  EXPECT_NE(failed.message().find(path), std::string::npos) << failed.message();
  EXPECT_NE(failed.message().find("does not exist"), std::string::npos) << failed.message();
}

}  // namespace
}  // namespace tessera
