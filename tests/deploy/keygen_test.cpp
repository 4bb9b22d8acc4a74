// `tessera keygen` through the real program: a new secret with mode 0600 that the worker accepts,
// and its refusals (an existing file, a symbolic link, a folder it cannot write into).
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../integration/process_fixture.hpp"
#include "tessera/core/files.hpp"
#include "tessera/transport/auth.hpp"

namespace tessera::balance {
namespace {

namespace fs = std::filesystem;

testing::CommandResult keygen(const std::string& args, const std::string& env = "") {
  return testing::run_command(env + (env.empty() ? "" : " ") + TESSERA_CLI_BINARY + " keygen " + args);
}

unsigned mode_of(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return 0;
  return info.st_mode & 07777;
}

TEST(Keygen, WritesAHexSecretWithMode0600) {
  testing::TempDir dir;
  const std::string path = dir.file("lab.secret");
  testing::CommandResult made = keygen(path);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(made.output.find(path), std::string::npos) << made.output;
  EXPECT_EQ(mode_of(path), 0600u);
  // What keygen makes passes the privacy check every reader of a secret applies.
  EXPECT_TRUE(check_private_path(path, PrivateKind::kFile, "secret file").is_ok());
  Result<std::string> secret = transport::read_secret_file(path);
  ASSERT_TRUE(secret) << secret.status().message();
  EXPECT_EQ(secret->size(), 2 * transport::kSecretBytes);
  EXPECT_EQ(secret->find_first_not_of("0123456789abcdef"), std::string::npos) << *secret;
  EXPECT_EQ(made.output.find(*secret), std::string::npos) << "the secret must never be printed";

  // Whatever the umask, the file is 0600.
  const std::string other = dir.file("umask.secret");
  testing::CommandResult loose = testing::run_command("umask 0 && " + std::string(TESSERA_CLI_BINARY) + " keygen " + other);
  ASSERT_EQ(loose.exit_code, 0) << loose.output;
  EXPECT_EQ(mode_of(other), 0600u);
  Result<std::string> second = transport::read_secret_file(other);
  ASSERT_TRUE(second);
  EXPECT_NE(*second, *secret) << "two keygens made the same secret";
}

TEST(Keygen, RefusesAnExistingFileUnlessForced) {
  testing::TempDir dir;
  const std::string path = dir.file("secret");
  ASSERT_EQ(keygen(path).exit_code, 0);
  const std::string before = testing::read_file(path);

  testing::CommandResult again = keygen(path);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  EXPECT_EQ(testing::read_file(path), before) << "a refused keygen changed the file";

  testing::CommandResult forced = keygen(path + " --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_NE(testing::read_file(path), before);
  EXPECT_EQ(mode_of(path), 0600u);
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename(), "secret") << "left behind: " << entry.path();
  }
}

TEST(Keygen, RefusesSymbolicLinksEvenWithForce) {
  testing::TempDir dir;
  const std::string target = dir.file("target");
  testing::write_file(target, "somebody else's file\n");
  const std::string link = dir.file("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  const std::string dangling = dir.file("dangling");
  ASSERT_EQ(::symlink(dir.file("nowhere").c_str(), dangling.c_str()), 0);

  for (const std::string& args : {link, link + " --force", dangling, dangling + " --force"}) {
    testing::CommandResult refused = keygen(args);
    EXPECT_EQ(refused.exit_code, 2) << args << ": " << refused.output;
    EXPECT_NE(refused.output.find("symbolic link"), std::string::npos) << args << ": " << refused.output;
  }
  EXPECT_EQ(testing::read_file(target), "somebody else's file\n");
  EXPECT_FALSE(fs::exists(dir.file("nowhere"))) << "keygen wrote through a dangling link";
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST(Keygen, RefusesAFolderAndAMissingOrUnwritableFolder) {
  testing::TempDir dir;
  testing::CommandResult folder = keygen(dir.path() + " --force");
  EXPECT_EQ(folder.exit_code, 2) << folder.output;
  EXPECT_NE(folder.output.find("a directory"), std::string::npos) << folder.output;

  testing::CommandResult missing = keygen(dir.file("no/such/folder/secret"));
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("does not exist"), std::string::npos) << missing.output;

  const std::string locked = dir.file("locked");
  ASSERT_EQ(::mkdir(locked.c_str(), 0500), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // so an unprivileged user can reach `locked`
  // Root writes anywhere; run the program as nobody to see the refusal a normal user gets.
  const std::string as_user = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups" : "";
  if (::geteuid() == 0 && ::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "root without setpriv";
  testing::CommandResult unwritable = keygen(locked + "/secret", as_user);
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.output;
  EXPECT_NE(unwritable.output.find("Permission denied"), std::string::npos) << unwritable.output;
  EXPECT_NE(unwritable.output.find(locked + "/secret"), std::string::npos) << unwritable.output;
  EXPECT_FALSE(fs::exists(locked + "/secret"));
}

TEST(Keygen, DefaultPathIsAPrivateFolderUnderXdgConfigHome) {
  testing::TempDir dir;
  const std::string config_home = dir.file("config");
  testing::CommandResult made = keygen("", "XDG_CONFIG_HOME=" + config_home);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_EQ(mode_of(config_home + "/tessera"), 0700u);
  EXPECT_EQ(mode_of(config_home + "/tessera/secret"), 0600u);
}

TEST(Keygen, AWorkerAcceptsTheSecret) {
  testing::TempDir dir;
  const std::string path = dir.file("secret");
  ASSERT_EQ(keygen(path).exit_code, 0);
  testing::LocalWorkers workers = testing::start_local_workers(1, path, dir);
  std::string yaml = "cluster: keygen\nsecret_file: " + path + "\nnodes:\n  - name: a\n    host: 127.0.0.1\n    port: " +
                     std::to_string(workers.nodes[0].port) + "\n    threads: 1\n";
  testing::write_file(dir.file("cluster.yaml"), yaml);
  testing::CommandResult multiply = testing::run_command(std::string(TESSERA_CLI_BINARY) + " multiply " +
                                                         dir.file("cluster.yaml") +
                                                         " --n 31 --policy even --fill integers --verify exact");
  EXPECT_EQ(multiply.exit_code, 0) << multiply.output;
}

}  // namespace
}  // namespace tessera::balance
