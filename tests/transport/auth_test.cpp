#include "tessera/transport/auth.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace tessera::transport {
namespace {

std::string hex(const Mac& mac) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t byte : mac) {
    out += kDigits[byte >> 4];
    out += kDigits[byte & 0xF];
  }
  return out;
}

Challenge filled(uint8_t value) {
  Challenge challenge{};
  challenge.fill(value);
  return challenge;
}

TEST(Auth, HmacSha256MatchesRfc4231) {
  // RFC 4231 test case 2.
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // RFC 4231 test case 1.
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(Auth, MacsFollowTheirDefinition) {
  const Challenge worker = filled(1);
  const Challenge coordinator = filled(2);
  const std::string worker_bytes(32, '\x01');
  const std::string coordinator_bytes(32, '\x02');
  EXPECT_EQ(coordinator_mac("s3cret", worker, coordinator),
            hmac_sha256("s3cret", "tessera-v1-coordinator" + worker_bytes + coordinator_bytes));
  EXPECT_EQ(worker_mac("s3cret", coordinator, worker),
            hmac_sha256("s3cret", "tessera-v1-worker" + coordinator_bytes + worker_bytes));
  EXPECT_EQ(peer_mac("s3cret", worker, coordinator),
            hmac_sha256("s3cret", "tessera-v2-peer" + worker_bytes + coordinator_bytes));
  EXPECT_EQ(client_mac(SessionRole::kPeer, "s3cret", worker, coordinator), peer_mac("s3cret", worker, coordinator));
  EXPECT_EQ(client_mac(SessionRole::kCoordinator, "s3cret", worker, coordinator),
            coordinator_mac("s3cret", worker, coordinator));
}

TEST(Auth, PeerAndCoordinatorMacsNeverStandForEachOther) {
  const Challenge a = filled(1);
  const Challenge b = filled(2);
  // A worker can tell a peer link from a coordinator session only if no MAC is valid as both.
  EXPECT_FALSE(mac_equal(peer_mac("s3cret", a, b), coordinator_mac("s3cret", a, b)));
  EXPECT_FALSE(mac_equal(peer_mac("s3cret", a, b), worker_mac("s3cret", b, a)));
  EXPECT_FALSE(mac_equal(peer_mac("s3cret", a, b), peer_mac("other", a, b)));
  EXPECT_EQ(role_name(SessionRole::kPeer), "peer worker");
  EXPECT_EQ(role_name(SessionRole::kCoordinator), "coordinator");
}

TEST(Auth, MacsDependOnSecretChallengesAndDirection) {
  const Challenge a = filled(1);
  const Challenge b = filled(2);
  const Mac reference = coordinator_mac("s3cret", a, b);
  EXPECT_TRUE(mac_equal(reference, coordinator_mac("s3cret", a, b)));
  EXPECT_FALSE(mac_equal(reference, coordinator_mac("s3creT", a, b)));
  EXPECT_FALSE(mac_equal(reference, coordinator_mac("s3cret", b, a)));
  // The labels keep a worker's answer from being replayed as a coordinator's, and vice versa.
  EXPECT_FALSE(mac_equal(reference, worker_mac("s3cret", a, b)));
}

TEST(Auth, MacEqualComparesEveryByte) {
  Mac a{};
  Mac b{};
  EXPECT_TRUE(mac_equal(a, b));
  b.back() = 1;
  EXPECT_FALSE(mac_equal(a, b));
  b.back() = 0;
  b.front() = 0x80;
  EXPECT_FALSE(mac_equal(a, b));
}

TEST(Auth, RandomChallengesAreFresh) {
  const Challenge first = random_challenge();
  const Challenge second = random_challenge();
  EXPECT_NE(first, second);
  EXPECT_NE(first, Challenge{});
}

class SecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("tessera-auth-test-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::string write(const std::string& name, const std::string& content) {
    const std::filesystem::path path = directory_ / name;
    std::ofstream(path, std::ios::binary) << content;
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    return path.string();
  }

  std::filesystem::path directory_;
};

TEST_F(SecretFileTest, MissingFileIsAnIoErrorNamingIt) {
  const std::string path = (directory_ / "absent.secret").string();
  Result<std::string> secret = read_secret_file(path);
  ASSERT_FALSE(secret);
  EXPECT_EQ(secret.status().code(), StatusCode::kIoError);
  EXPECT_NE(secret.status().message().find(path), std::string::npos) << secret.status().to_string();
}

TEST_F(SecretFileTest, EmptyOrBlankFileIsRejected) {
  for (const std::string content : {"", "\n", "  \t\r\n"}) {
    const std::string path = write("blank.secret", content);
    Result<std::string> secret = read_secret_file(path);
    ASSERT_FALSE(secret);
    EXPECT_EQ(secret.status().code(), StatusCode::kIoError);
    EXPECT_NE(secret.status().message().find("empty"), std::string::npos) << secret.status().to_string();
    EXPECT_NE(secret.status().message().find(path), std::string::npos);
  }
}

// The worker's --secret-file goes through core's privacy check, as the coordinator's does.
TEST_F(SecretFileTest, AFileOthersCanReadIsRefusedWithTheChmod) {
  const std::string path = write("open.secret", "correct horse\n");
  std::filesystem::permissions(path, std::filesystem::perms::group_read | std::filesystem::perms::others_read,
                               std::filesystem::perm_options::add);
  Result<std::string> secret = read_secret_file(path);
  ASSERT_FALSE(secret);
  EXPECT_EQ(secret.status().code(), StatusCode::kInvalidConfig);
  EXPECT_NE(secret.status().message().find("chmod 600 " + path), std::string::npos) << secret.status().to_string();
}

TEST_F(SecretFileTest, TrailingWhitespaceIsTrimmed) {
  Result<std::string> secret = read_secret_file(write("lab.secret", "correct horse\n"));
  ASSERT_TRUE(secret) << secret.status().to_string();
  EXPECT_EQ(*secret, "correct horse");

  secret = read_secret_file(write("crlf.secret", " lead stays \r\n\t \n"));
  ASSERT_TRUE(secret) << secret.status().to_string();
  EXPECT_EQ(*secret, " lead stays");
}

TEST_F(SecretFileTest, LengthLimit) {
  std::string longest_text(4096, 'k');
  longest_text.push_back('\n');
  Result<std::string> longest = read_secret_file(write("4096.secret", longest_text));
  ASSERT_TRUE(longest) << longest.status().to_string();
  EXPECT_EQ(longest->size(), 4096u);

  Result<std::string> too_long = read_secret_file(write("4097.secret", std::string(4097, 'k')));
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.status().message().find("longer than 4096"), std::string::npos);

  Result<std::string> huge = read_secret_file(write("huge.secret", std::string(1 << 20, 'k')));
  EXPECT_FALSE(huge);
}

TEST_F(SecretFileTest, DirectoryIsNotASecret) {
  Result<std::string> secret = read_secret_file(directory_.string());
  ASSERT_FALSE(secret);
  EXPECT_EQ(secret.status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace tessera::transport
