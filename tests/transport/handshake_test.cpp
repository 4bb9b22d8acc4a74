#include "tessera/transport/frame_connection.hpp"

#include <gtest/gtest.h>

#include <thread>

#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "loopback.hpp"
#include "tessera/transport/auth.hpp"

namespace tessera::transport {
namespace {

using testing::make_loopback;
using testing::PeerThread;

Hello pi_hello() {
  Hello hello;
  hello.worker_version = "0.1.0";
  hello.arch = "aarch64";
  hello.hostname = "pi3";
  hello.cores = 4;
  hello.threads = 4;
  hello.memory_bytes = 4ull << 30;
  hello.tile_memory_cap = 3ull << 30;
  hello.capabilities = kCapabilityGemm;
  hello.challenge = random_challenge();
  return hello;
}

// A whole frame as a peer built for protocol v1 writes it: v1 header, v1 payload layout.
std::vector<std::byte> v1_frame(MessageType type, std::vector<std::byte> payload) {
  FrameHeader header;
  header.version = 1;
  header.type = static_cast<uint16_t>(type);
  header.payload_length = payload.size();
  const auto header_bytes = encode_header(header);
  payload.insert(payload.begin(), header_bytes.begin(), header_bytes.end());
  return payload;
}

// A HELLO as a v1 worker sends it: no capabilities field.
std::vector<std::byte> v1_hello_frame() {
  Hello hello = pi_hello();
  hello.protocol_version = 1;
  std::vector<std::byte> payload = encode_payload(hello);
  const auto challenge_at = payload.end() - static_cast<std::ptrdiff_t>(kChallengeSize);
  payload.erase(challenge_at - 8, challenge_at);
  return v1_frame(MessageType::kHello, std::move(payload));
}

Status write_raw(FrameConnection& connection, const std::vector<std::byte>& bytes) {
  const std::array<asio::const_buffer, 1> parts{asio::buffer(bytes)};
  return connection.write_buffers(parts);
}

// Reads one frame written in protocol v1 framing and returns its ERROR, as a v1 peer would.
::testing::AssertionResult read_v1_error(FrameConnection& connection, Error& error) {
  std::array<std::byte, kHeaderSize> header{};
  if (Status read = connection.read_exact(header); !read.is_ok()) {
    return ::testing::AssertionFailure() << read.to_string();
  }
  if (foreign_protocol_version(header) != std::optional<uint16_t>(1)) {
    return ::testing::AssertionFailure() << "the reply is not framed as v1";
  }
  uint64_t length = 0;
  std::memcpy(&length, header.data() + 16, sizeof length);  // the host is little-endian
  if (length > 64 * 1024) return ::testing::AssertionFailure() << "reply claims " << length << " bytes";
  std::vector<std::byte> payload(length);
  if (Status read = connection.read_exact(payload); !read.is_ok()) {
    return ::testing::AssertionFailure() << read.to_string();
  }
  const uint16_t type = static_cast<uint16_t>(std::to_integer<unsigned>(header[6]) | std::to_integer<unsigned>(header[7]) << 8);
  Result<Message> message = decode_payload(type, payload, Limits{});
  if (!message || !std::holds_alternative<Error>(*message)) {
    return ::testing::AssertionFailure() << "reply is " << message_type_name(type) << ", not a decodable ERROR";
  }
  error = std::get<Error>(*message);
  return ::testing::AssertionSuccess();
}

TEST(Handshake, SameSecretSucceedsOnBothSides) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const Hello hello = pi_hello();
  Status worker_status = internal_error("worker did not run");
  PeerThread worker(*pair->server, [&] { worker_status = server_handshake(*pair->server, hello, "correct horse"); });

  Result<Hello> seen = client_handshake(*pair->client, "correct horse");
  worker.join();
  ASSERT_TRUE(seen) << seen.status().to_string();
  EXPECT_EQ(*seen, hello);
  EXPECT_TRUE(worker_status.is_ok()) << worker_status.to_string();

  // The stream is still in step after the handshake.
  ASSERT_TRUE(pair->client->write_message(Bye{}, 5).is_ok());
  Result<IncomingFrame> bye = pair->server->read_frame();
  ASSERT_TRUE(bye) << bye.status().to_string();
  EXPECT_TRUE(std::holds_alternative<Bye>(bye->message));
}

// The worker's caller is asked between the MAC check and the verdict, with the verdict, before
// anything is written: a refusal there (an evicted connection, a throttled address) sends no
// AUTH_OK, and the client sees what the caller wrote, never a session that is not there.
TEST(Handshake, TheCallerSeesEachAnswerBeforeItsVerdictAndMayRefuseIt) {
  struct Case {
    std::string client_secret;
    bool refuse;
    StatusCode client_sees;
  };
  for (const Case& c : {Case{"correct horse", false, StatusCode::kOk}, Case{"battery staple", false, StatusCode::kAuthFailed},
                        Case{"correct horse", true, StatusCode::kBusy}, Case{"battery staple", true, StatusCode::kBusy}}) {
    SCOPED_TRACE(c.client_secret + (c.refuse ? " refused" : ""));
    auto pair = make_loopback();
    ASSERT_TRUE(pair);
    std::vector<bool> answers;
    bool verdict_already_sent = false;
    Status worker_status = internal_error("worker did not run");
    PeerThread worker(*pair->server, [&] {
      ServerHandshakeHooks hooks;
      hooks.on_answer = [&](bool mac_right) {
        answers.push_back(mac_right);
        verdict_already_sent = pair->client->wait_readable(std::chrono::milliseconds(50));
        if (!c.refuse) return Status::ok();
        pair->server->write_error(ErrorCode::kThrottled, "held answers");
        return Status(StatusCode::kBusy, "throttled");
      };
      worker_status = server_handshake(*pair->server, pi_hello(), "correct horse", WireMode::kPlain, hooks);
      if (!worker_status.is_ok()) pair->server->shutdown();  // what the worker does with a refused connection
    });
    Result<Hello> seen = client_handshake(*pair->client, c.client_secret);
    worker.join();
    EXPECT_EQ(seen.status().code(), c.client_sees) << seen.status().to_string();
    EXPECT_EQ(worker_status.code(), c.refuse ? StatusCode::kBusy : c.client_sees) << worker_status.to_string();
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(answers[0], c.client_secret == "correct horse");
    EXPECT_FALSE(verdict_already_sent) << "the client had its verdict before the caller was asked";
    if (c.refuse) {
      EXPECT_NE(seen.status().message().find("is throttling connections from this address after failed authentications "
                                             "from it: held answers"),
                std::string::npos)
          << seen.status().to_string();
    }
  }
}

// A worker that holds the answer says so (HELD, with when to expect the verdict): the client then
// waits past its own timeout, up to what HELD says plus a margin; without HELD it would give up.
TEST(Handshake, AClientToldItsAnswerIsHeldWaitsPastItsTimeoutForTheVerdict) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status worker_status = internal_error("worker did not run");
  PeerThread worker(*pair->server, [&] {
    ServerHandshakeHooks hooks;
    hooks.on_answer = [&](bool) {
      EXPECT_TRUE(write_held(*pair->server, Held{1500, 3}).is_ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      EXPECT_TRUE(write_held(*pair->server, Held{1500, 0}).is_ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      return Status::ok();
    };
    worker_status = server_handshake(*pair->server, pi_hello(), "correct horse", WireMode::kPlain, hooks);
  });
  const auto start = std::chrono::steady_clock::now();
  Result<Hello> seen = client_handshake(*pair->client, "correct horse", std::chrono::milliseconds(500));
  worker.join();
  ASSERT_TRUE(seen) << seen.status().to_string();
  EXPECT_TRUE(worker_status.is_ok()) << worker_status.to_string();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1400));
}

TEST(Handshake, AnyRoleServerTellsAPeerWorkerFromTheCoordinator) {
  for (SessionRole role : {SessionRole::kCoordinator, SessionRole::kPeer}) {
    SCOPED_TRACE(std::string(role_name(role)));
    auto pair = make_loopback();
    ASSERT_TRUE(pair);
    std::optional<Result<SessionRole>> accepted;
    PeerThread worker(*pair->server,
                      [&] { accepted = server_handshake_any_role(*pair->server, pi_hello(), "correct horse"); });
    Result<Hello> seen = client_handshake(*pair->client, "correct horse", kDefaultHandshakeTimeout, role);
    worker.join();
    ASSERT_TRUE(seen) << seen.status().to_string();
    ASSERT_TRUE(accepted && *accepted) << (accepted ? accepted->status().to_string() : "no result");
    EXPECT_EQ(**accepted, role);
  }
}

TEST(Handshake, CoordinatorOnlyServerRefusesAPeerMac) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status worker_status = internal_error("worker did not run");
  PeerThread worker(*pair->server, [&] { worker_status = server_handshake(*pair->server, pi_hello(), "correct horse"); });
  Result<Hello> seen = client_handshake(*pair->client, "correct horse", kDefaultHandshakeTimeout, SessionRole::kPeer);
  worker.join();
  EXPECT_EQ(seen.status().code(), StatusCode::kAuthFailed) << seen.status().to_string();
  EXPECT_EQ(worker_status.code(), StatusCode::kAuthFailed);
  EXPECT_NE(worker_status.message().find("coordinator's MAC does not match the secret"), std::string::npos)
      << worker_status.to_string();
}

TEST(Handshake, PeerWithAWrongSecretIsRefusedByAnAnyRoleServer) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  std::optional<Result<SessionRole>> accepted;
  PeerThread worker(*pair->server,
                    [&] { accepted = server_handshake_any_role(*pair->server, pi_hello(), "correct horse"); });
  Result<Hello> seen = client_handshake(*pair->client, "battery staple", kDefaultHandshakeTimeout, SessionRole::kPeer);
  worker.join();
  EXPECT_EQ(seen.status().code(), StatusCode::kAuthFailed) << seen.status().to_string();
  ASSERT_TRUE(accepted.has_value());
  EXPECT_EQ(accepted->status().code(), StatusCode::kAuthFailed);
  EXPECT_NE(accepted->status().message().find("MAC (as coordinator or as peer worker) does not match the secret"),
            std::string::npos)
      << accepted->status().to_string();
}

TEST(Handshake, CoordinatorRefusesAV1WorkerNamingBothVersions) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Error told{};
  bool told_in_v1 = false;
  PeerThread old_worker(*pair->server, [&] {
    if (!write_raw(*pair->server, v1_hello_frame()).is_ok()) return;
    told_in_v1 = read_v1_error(*pair->server, told);
  });

  Result<Hello> seen = client_handshake(*pair->client, "correct horse");
  old_worker.join();
  ASSERT_FALSE(seen);
  EXPECT_EQ(seen.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(seen.status().message().find("worker " + pair->client->peer() +
                                         " speaks Tessera protocol v1, this build speaks v2; upgrade tessera-worker "
                                         "on 127.0.0.1"),
            std::string::npos)
      << seen.status().to_string();
  // The old worker can read why: the refusal comes in its own version.
  EXPECT_TRUE(told_in_v1);
  EXPECT_EQ(told.code, ErrorCode::kBadFrame);
  EXPECT_EQ(told.message, "peer speaks Tessera protocol v1, this build speaks v2");
}

TEST(Handshake, WorkerRefusesAV1CoordinatorNamingBothVersions) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status worker_status;
  PeerThread worker(*pair->server, [&] {
    worker_status = server_handshake(*pair->server, pi_hello(), "correct horse");
  });

  // A v1 coordinator cannot read the v2 HELLO and answers with ERROR in its own framing.
  std::array<std::byte, kHeaderSize> hello_header{};
  ASSERT_TRUE(pair->client->read_exact(hello_header).is_ok());
  EXPECT_TRUE(decode_header(hello_header, Limits{})) << "the worker's HELLO is a v2 frame";
  const std::vector<std::byte> v1_error = v1_frame(
      MessageType::kError, encode_payload(Error{ErrorCode::kBadFrame, "frame header: version 2 unsupported; this "
                                                                      "build speaks 1"}));
  ASSERT_TRUE(write_raw(*pair->client, v1_error).is_ok());
  worker.join();
  EXPECT_EQ(worker_status.code(), StatusCode::kProtocolError) << worker_status.to_string();
  EXPECT_NE(worker_status.message().find("coordinator " + pair->server->peer() +
                                         " speaks Tessera protocol v1, this build speaks v2; upgrade tessera on the "
                                         "coordinator's machine (127.0.0.1)"),
            std::string::npos)
      << worker_status.to_string();
}

TEST(Handshake, WrongSecretFailsOnBothSides) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status worker_status;
  PeerThread worker(*pair->server, [&] {
    worker_status = server_handshake(*pair->server, pi_hello(), "correct horse");
  });

  Result<Hello> seen = client_handshake(*pair->client, "battery staple");
  worker.join();
  ASSERT_FALSE(seen);
  EXPECT_EQ(seen.status().code(), StatusCode::kAuthFailed);
  EXPECT_NE(seen.status().message().find("worker rejected the secret"), std::string::npos) << seen.status().to_string();
  EXPECT_NE(seen.status().message().find(pair->client->peer()), std::string::npos);
  EXPECT_EQ(worker_status.code(), StatusCode::kAuthFailed) << worker_status.to_string();
}

TEST(Handshake, AnyFrameBeforeAuthGetsAuthRequired) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status worker_status;
  PeerThread worker(*pair->server, [&] {
    worker_status = server_handshake(*pair->server, pi_hello(), "correct horse");
  });

  Result<IncomingFrame> hello = pair->client->read_frame();
  ASSERT_TRUE(hello) << hello.status().to_string();
  ASSERT_TRUE(std::holds_alternative<Hello>(hello->message));
  // A JOB (the GEMM service's; its layout does not matter before AUTH).
  const std::vector<std::byte> job(72);
  const std::array<asio::const_buffer, 1> parts{asio::buffer(job)};
  FrameHeader job_header;
  job_header.type = static_cast<uint16_t>(MessageType::kJob);
  job_header.request_id = 17;
  ASSERT_TRUE(pair->client->write_frame(job_header, parts).is_ok());

  Result<IncomingFrame> reply = pair->client->read_frame();
  worker.join();
  ASSERT_TRUE(reply) << reply.status().to_string();
  const auto* error = std::get_if<Error>(&reply->message);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, ErrorCode::kAuthRequired);
  EXPECT_EQ(reply->header.request_id, 17u);
  EXPECT_NE(error->message.find("JOB"), std::string::npos) << error->message;
  EXPECT_FALSE(worker_status.is_ok());
}

TEST(Handshake, MalformedFrameBeforeAuthGetsBadFrame) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status worker_status;
  PeerThread worker(*pair->server, [&] {
    worker_status = server_handshake(*pair->server, pi_hello(), "correct horse");
  });

  ASSERT_TRUE(pair->client->read_frame());
  const std::string garbage = "GET / HTTP/1.1\r\nHost: pi3:7070\r\n\r\n";
  const std::array<asio::const_buffer, 1> parts = {asio::buffer(garbage)};
  ASSERT_TRUE(pair->client->write_buffers(parts).is_ok());

  Result<IncomingFrame> reply = pair->client->read_frame();
  worker.join();
  ASSERT_TRUE(reply) << reply.status().to_string();
  const auto* error = std::get_if<Error>(&reply->message);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, ErrorCode::kBadFrame);
  EXPECT_NE(error->message.find("magic"), std::string::npos) << error->message;
  EXPECT_EQ(worker_status.code(), StatusCode::kProtocolError) << worker_status.to_string();
}

TEST(Handshake, WorkerThatDoesNotKnowTheSecretIsCaught) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  // A fake worker: sends HELLO, ignores the AUTH it gets, answers with a made-up MAC.
  bool fake_saw_auth = false;
  ErrorCode fake_got = ErrorCode::kInternal;
  PeerThread fake(*pair->server, [&] {
    if (!pair->server->write_message(pi_hello()).is_ok()) return;
    Result<IncomingFrame> auth = pair->server->read_frame();
    fake_saw_auth = auth && std::holds_alternative<Auth>(auth->message);
    if (!pair->server->write_message(AuthOk{}).is_ok()) return;
    Result<IncomingFrame> reply = pair->server->read_frame();
    if (reply && std::holds_alternative<Error>(reply->message)) fake_got = std::get<Error>(reply->message).code;
  });

  Result<Hello> seen = client_handshake(*pair->client, "correct horse");
  fake.join();
  ASSERT_FALSE(seen);
  EXPECT_EQ(seen.status().code(), StatusCode::kAuthFailed);
  EXPECT_NE(seen.status().message().find("worker's answer does not match the secret"), std::string::npos)
      << seen.status().to_string();
  EXPECT_TRUE(fake_saw_auth);
  EXPECT_EQ(fake_got, ErrorCode::kAuthFailed);
}

TEST(Handshake, BusyWorkerIsReported) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->server->write_error(ErrorCode::kBusy, "serving coordinator 10.0.0.2:51234");
  Result<Hello> seen = client_handshake(*pair->client, "correct horse");
  ASSERT_FALSE(seen);
  EXPECT_EQ(seen.status().code(), StatusCode::kBusy);
  EXPECT_NE(seen.status().message().find("BUSY: serving coordinator"), std::string::npos) << seen.status().to_string();
}

TEST(Handshake, EmptySecretOrStaleChallengeIsRefusedLocally) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  EXPECT_EQ(client_handshake(*pair->client, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(server_handshake(*pair->server, pi_hello(), "").code(), StatusCode::kInvalidArgument);
  Hello unset = pi_hello();
  unset.challenge = {};
  EXPECT_EQ(server_handshake(*pair->server, unset, "s").code(), StatusCode::kInternal);
  EXPECT_EQ(pair->server->bytes_sent(), 0u);
}

}  // namespace
}  // namespace tessera::transport
