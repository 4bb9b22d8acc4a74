#include "tessera/core/files.hpp"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

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

// check_private_path / read_private_file: the one privacy check for secrets and their folder.
TEST_F(PrivateFile, APrivateSecretIsAccepted) {
  const std::string path = dir_ + "/secret";
  ASSERT_TRUE(write_private_file(path, "s3cret\n", PrivateWrite::kCreateNew, "secret file").is_ok());
  EXPECT_TRUE(check_private_path(path, PrivateKind::kFile, "secret file").is_ok());
  Result<std::string> read_back = read_private_file(path, 64, "secret file");
  ASSERT_TRUE(read_back.is_ok()) << read_back.status().to_string();
  EXPECT_EQ(*read_back, "s3cret\n");
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);
  EXPECT_TRUE(read_private_file(path, 64, "secret file").is_ok());
  EXPECT_TRUE(check_private_path(dir_, PrivateKind::kFolder, "run directory").is_ok());
}

TEST_F(PrivateFile, GroupOrOtherBitsAreRefusedWithTheChmod) {
  const std::string path = dir_ + "/secret";
  std::ofstream(path) << "s3cret\n";
  for (const auto& [mode, words] : std::vector<std::pair<mode_t, std::string>>{
           {0640, "its group can read"}, {0604, "every user can read"}, {0644, "every user can read"},
           {0620, "its group can change"}, {0602, "every user can change"}}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    for (const Status& refused : {check_private_path(path, PrivateKind::kFile, "secret file"),
                                  read_private_file(path, 64, "secret file").status()}) {
      EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig) << mode;
      EXPECT_NE(refused.message().find("secret file '" + path + "' has mode 0"), std::string::npos) << refused.message();
      EXPECT_NE(refused.message().find(words), std::string::npos) << refused.message();
      EXPECT_NE(refused.message().find("chmod 600 " + path), std::string::npos) << refused.message();
    }
  }
  ASSERT_EQ(::chmod(dir_.c_str(), 0750), 0);
  const Status folder = check_private_path(dir_, PrivateKind::kFolder, "run directory");
  EXPECT_NE(folder.message().find("chmod 700 " + dir_), std::string::npos) << folder.message();
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
}

TEST_F(PrivateFile, ASecretOfAnotherUserIsRefusedWithTheChown) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  const std::string path = dir_ + "/secret";
  std::ofstream(path) << "s3cret\n";
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  const Status refused = read_private_file(path, 64, "secret file").status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(refused.message().find("belongs to uid 65534, not to you (uid 0)"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("chown root " + path), std::string::npos) << refused.message();
}

TEST_F(PrivateFile, MissingIsNotFoundAndAFifoIsRefusedByWhatItIs) {
  EXPECT_EQ(check_private_path(dir_ + "/absent", PrivateKind::kFile, "secret file").code(), StatusCode::kNotFound);
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(read_private_file(fifo, 64, "secret file").status().message().find("FIFO"), std::string::npos);
}

// Linux's access-ACL xattr (include/uapi/linux/posix_acl_xattr.h): version 2, then
// {u16 tag, u16 permissions, u32 id} entries, little-endian.
std::string acl_blob(const std::vector<std::tuple<uint16_t, uint16_t, uint32_t>>& entries) {
  std::string blob = {2, 0, 0, 0};
  for (const auto& [tag, permissions, id] : entries) {
    for (const uint32_t value : {uint32_t{tag}, uint32_t{permissions}}) {
      blob += static_cast<char>(value & 0xff);
      blob += static_cast<char>(value >> 8);
    }
    for (int shift = 0; shift < 32; shift += 8) blob += static_cast<char>((id >> shift) & 0xff);
  }
  return blob;
}

// systemd's LoadCredential= on tmpfs: mode 0440 because of the ACL's mask, the owning group has
// nothing and one named user (the service) may read. Private; a named group that may read is not.
TEST_F(PrivateFile, AnAclIsJudgedByItsEntriesNotByTheMask) {
  const std::string path = dir_ + "/credential";
  std::ofstream(path) << "s3cret\n";
  const std::string service_only = acl_blob({{0x01, 4, 0xffffffff}, {0x02, 4, 61234}, {0x04, 0, 0xffffffff},
                                             {0x10, 4, 0xffffffff}, {0x20, 0, 0xffffffff}});
  if (::setxattr(path.c_str(), "system.posix_acl_access", service_only.data(), service_only.size(), 0) != 0) {
    GTEST_SKIP() << "this file system takes no POSIX ACLs: " << std::strerror(errno);
  }
  EXPECT_EQ(mode_of(path) & 070, 040u) << "the group bits show the ACL's mask";
  // The named user is the service, which a root-run check takes as "another user".
  const Status named_user = read_private_file(path, 64, "secret file").status();
  EXPECT_NE(named_user.message().find("uid 61234 (an ACL entry)"), std::string::npos) << named_user.message();
  const std::string own_entry = acl_blob({{0x01, 4, 0xffffffff}, {0x02, 4, ::geteuid()}, {0x04, 0, 0xffffffff},
                                          {0x10, 4, 0xffffffff}, {0x20, 0, 0xffffffff}});
  ASSERT_EQ(::setxattr(path.c_str(), "system.posix_acl_access", own_entry.data(), own_entry.size(), 0), 0);
  EXPECT_TRUE(read_private_file(path, 64, "secret file").is_ok());
  const std::string group_reads = acl_blob({{0x01, 4, 0xffffffff}, {0x04, 0, 0xffffffff}, {0x08, 4, 4242},
                                            {0x10, 4, 0xffffffff}, {0x20, 0, 0xffffffff}});
  ASSERT_EQ(::setxattr(path.c_str(), "system.posix_acl_access", group_reads.data(), group_reads.size(), 0), 0);
  const Status refused = read_private_file(path, 64, "secret file").status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig);
  EXPECT_NE(refused.message().find("gid 4242 (an ACL entry)"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("setfacl -b " + path + " && chmod 600 " + path), std::string::npos)
      << refused.message();
}

}  // namespace
}  // namespace tessera
