// The run directory must be private before the secret goes in it, and a cluster's secret_file
// must be a small regular file: both checked without starting any process.
#include "tessera/emulation/local_cluster.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance {
namespace {

namespace fs = std::filesystem;

class PrivateDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-rundir-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(PrivateDirs, A0700DirectoryOfOursIsPrivate) {
  ASSERT_EQ(::mkdir(path("run").c_str(), 0700), 0);
  EXPECT_TRUE(emulation::check_private_dir(path("run")).is_ok());
  EXPECT_EQ(emulation::check_private_dir(path("absent")).code(), StatusCode::kNotFound);
}

TEST_F(PrivateDirs, GroupOrOtherBitsAreRefusedWithTheFix) {
  for (const mode_t mode : {0750, 0705, 0770, 0701}) {
    const std::string run = path("run-" + std::to_string(mode));
    ASSERT_EQ(::mkdir(run.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(run.c_str(), mode), 0);
    const Status checked = emulation::check_private_dir(run);
    ASSERT_FALSE(checked.is_ok()) << mode;
    EXPECT_EQ(checked.code(), StatusCode::kInvalidConfig);
    EXPECT_NE(checked.message().find("chmod 700 " + run), std::string::npos) << checked.message();
  }
}

TEST_F(PrivateDirs, ASymlinkIsRefusedEvenToAPrivateDirectory) {
  ASSERT_EQ(::mkdir(path("real").c_str(), 0700), 0);
  fs::create_symlink(path("real"), path("link"));
  const Status checked = emulation::check_private_dir(path("link"));
  ASSERT_FALSE(checked.is_ok());
  EXPECT_NE(checked.message().find("is a symbolic link"), std::string::npos) << checked.message();
  std::ofstream(path("file")) << "x";
  EXPECT_NE(emulation::check_private_dir(path("file")).message().find("is a regular file, not a directory"), std::string::npos);
}

TEST_F(PrivateDirs, ADirectoryOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  ASSERT_EQ(::mkdir(path("theirs").c_str(), 0700), 0);
  ASSERT_EQ(::chown(path("theirs").c_str(), 65534, 65534), 0);
  const Status checked = emulation::check_private_dir(path("theirs"));
  ASSERT_FALSE(checked.is_ok());
  EXPECT_NE(checked.message().find("belongs to uid 65534, not to you"), std::string::npos) << checked.message();
}

TEST_F(PrivateDirs, DefaultRunDirFollowsXdgRuntimeDir) {
  const char* saved_run_dir = std::getenv("TESSERA_RUN_DIR");
  const char* saved_runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::string run_dir_copy = saved_run_dir ? saved_run_dir : "";
  const std::string runtime_copy = saved_runtime ? saved_runtime : "";
  ::unsetenv("TESSERA_RUN_DIR");
  ::setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
  EXPECT_EQ(emulation::default_run_dir(), "/run/user/4242/tessera");
  ::unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(emulation::default_run_dir(), "/tmp/tessera-" + std::to_string(::getuid()));
  ::setenv("TESSERA_RUN_DIR", "/somewhere", 1);
  EXPECT_EQ(emulation::default_run_dir(), "/somewhere");
  if (saved_run_dir) ::setenv("TESSERA_RUN_DIR", run_dir_copy.c_str(), 1); else ::unsetenv("TESSERA_RUN_DIR");
  if (saved_runtime) ::setenv("XDG_RUNTIME_DIR", runtime_copy.c_str(), 1); else ::unsetenv("XDG_RUNTIME_DIR");
}

// A cluster file whose secret_file is `target`.
cluster::ClusterSpec cluster_with_secret_file(const std::string& target) {
  Result<cluster::ClusterSpec> spec = cluster::parse_cluster_spec(
      "cluster: lab\nsecret_file: " + target + "\nnodes:\n  - name: a\n    host: 127.0.0.1\n    port: 7070\n",
      "/etc/lab.yaml");
  EXPECT_TRUE(spec.is_ok()) << spec.status().to_string();
  return spec.is_ok() ? *spec : cluster::ClusterSpec{};
}

TEST_F(PrivateDirs, SecretFilesMustBeSmallRegularFiles) {
  const std::string fifo = path("secret.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [target, expected] : std::vector<std::pair<std::string, std::string>>{
           {"/dev/zero", "secret file '/dev/zero' is a character device"},
           {fifo, "is a FIFO"},
           {dir_.string(), "is a directory"}}) {
    Result<std::string> secret = cluster_with_secret_file(target).resolve_secret();
    ASSERT_FALSE(secret.is_ok()) << target;
    EXPECT_EQ(secret.status().code(), StatusCode::kInvalidConfig);
    EXPECT_NE(secret.status().message().find("/etc/lab.yaml:2: "), std::string::npos) << secret.status().message();
    EXPECT_NE(secret.status().message().find(expected), std::string::npos) << secret.status().message();
  }
  std::ofstream(path("huge.secret")) << std::string(100 * 1024, 'k');
  ASSERT_EQ(::chmod(path("huge.secret").c_str(), 0600), 0);  // private, so the size is what is refused
  Result<std::string> huge = cluster_with_secret_file(path("huge.secret")).resolve_secret();
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("larger than 64 KiB"), std::string::npos) << huge.status().message();
  std::ofstream(path("long.secret")) << std::string(5000, 'k') << "\n";
  ASSERT_EQ(::chmod(path("long.secret").c_str(), 0600), 0);
  Result<std::string> too_long = cluster_with_secret_file(path("long.secret")).resolve_secret();
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_NE(too_long.status().message().find("at most 4096"), std::string::npos) << too_long.status().message();
  std::ofstream(path("good.secret")) << "s3cret\n";
  ASSERT_EQ(::chmod(path("good.secret").c_str(), 0600), 0);
  const cluster::ClusterSpec good = cluster_with_secret_file(path("good.secret"));
  EXPECT_EQ(*good.resolve_secret(), "s3cret");
  EXPECT_TRUE(emulation::secret_exposure_warnings(good).empty());
}

// A secret_file others can read or change is refused where it is read, by the run directory's
// own check (core's check_private_path), naming the file and the chmod that fixes it.
TEST_F(PrivateDirs, ASecretFileOthersCanReadIsRefusedWithTheChmod) {
  std::ofstream(path("open.secret")) << "s3cret\n";
  for (const mode_t mode : {0640, 0604, 0644, 0620}) {
    ASSERT_EQ(::chmod(path("open.secret").c_str(), mode), 0);
    Result<std::string> secret = cluster_with_secret_file(path("open.secret")).resolve_secret();
    ASSERT_FALSE(secret.is_ok()) << mode;
    EXPECT_EQ(secret.status().code(), StatusCode::kInvalidConfig);
    EXPECT_NE(secret.status().message().find("/etc/lab.yaml:2: secret file '" + path("open.secret") + "' has mode"),
              std::string::npos)
        << secret.status().message();
    EXPECT_NE(secret.status().message().find("chmod 600 " + path("open.secret")), std::string::npos)
        << secret.status().message();
  }
}

TEST_F(PrivateDirs, ASecretFileOfAnotherUserIsRefusedWithTheChown) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  std::ofstream(path("theirs.secret")) << "s3cret\n";
  ASSERT_EQ(::chmod(path("theirs.secret").c_str(), 0600), 0);
  ASSERT_EQ(::chown(path("theirs.secret").c_str(), 65534, 65534), 0);
  Result<std::string> secret = cluster_with_secret_file(path("theirs.secret")).resolve_secret();
  ASSERT_FALSE(secret.is_ok());
  EXPECT_NE(secret.status().message().find("belongs to uid 65534, not to you"), std::string::npos)
      << secret.status().message();
  EXPECT_NE(secret.status().message().find("chown root " + path("theirs.secret")), std::string::npos)
      << secret.status().message();
}

TEST(NonFiniteInstance, TheNpyInstanceNamesItsNaN) {
  Result<linalg::Matrix> a = linalg::read_npy(std::string(TESSERA_TEST_INSTANCES) + "/npy/nan-at-12-7.npy");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  const std::optional<multiply::NonFiniteEntry> entry = multiply::first_nonfinite(*a);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(multiply::describe_nonfinite("A", *entry), "A[12][7] is NaN");
}

}  // namespace
}  // namespace tessera::balance
