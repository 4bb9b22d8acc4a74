#include "tessera/transport/request.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "loopback.hpp"

namespace tessera::transport {
namespace {

using testing::make_loopback;
using testing::PeerThread;

::testing::AssertionResult contains(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << needle << "'";
}

// A frame of a service's type whose payload transport does not read (the GEMM service's replies
// read whole by type are tests/gemm/wire_io_test.cpp's).
Status write_service_frame(FrameConnection& connection, MessageType type, std::size_t payload_bytes) {
  const std::vector<std::byte> payload(payload_bytes, std::byte{0x5a});
  const std::array<asio::const_buffer, 1> parts{asio::buffer(payload)};
  FrameHeader header;
  header.type = static_cast<uint16_t>(type);
  return connection.write_frame(header, parts);
}

TEST(Request, ReplyHeaderReturnsTheExpectedTypeAndLeavesItsPayload) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  ASSERT_TRUE(write_service_frame(*pair->server, MessageType::kCredit, 24).is_ok());
  ASSERT_TRUE(write_service_frame(*pair->server, MessageType::kResult, 80).is_ok());

  Result<FrameHeader> credit = read_reply_header(*pair->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_TRUE(credit) << credit.status().to_string();
  EXPECT_EQ(credit->type, static_cast<uint16_t>(MessageType::kCredit));
  std::vector<std::byte> payload;
  ASSERT_TRUE(pair->client->read_growing(payload, credit->payload_length).is_ok());
  EXPECT_EQ(payload.size(), 24u);

  Result<FrameHeader> result = read_reply_header(*pair->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_TRUE(result) << result.status().to_string();
  ASSERT_EQ(result->type, static_cast<uint16_t>(MessageType::kResult));
  EXPECT_EQ(result->payload_length, 80u);
  std::vector<std::byte> landed(80);
  ASSERT_TRUE(pair->client->read_exact(landed).is_ok());
  EXPECT_EQ(landed, std::vector<std::byte>(80, std::byte{0x5a}));
}

TEST(Request, EveryErrorCodeMapsToItsStatusCode) {
  struct Case {
    ErrorCode error;
    StatusCode status;
    std::string phrase;
  };
  const std::vector<Case> cases = {
      {ErrorCode::kOutOfMemory, StatusCode::kResourceExhausted, "out of memory"},
      {ErrorCode::kNoSuchTile, StatusCode::kNotFound, "no such tile"},
      {ErrorCode::kAuthFailed, StatusCode::kAuthFailed, "authentication failed"},
      {ErrorCode::kAuthRequired, StatusCode::kAuthFailed, "authentication required"},
      {ErrorCode::kBadFrame, StatusCode::kProtocolError, "a bad frame"},
      {ErrorCode::kBadJob, StatusCode::kProtocolError, "a bad job"},
      {ErrorCode::kInternal, StatusCode::kInternal, "an internal error"},
      {ErrorCode::kBusy, StatusCode::kBusy, "busy"},
      {ErrorCode::kCorrupt, StatusCode::kNetworkError, "a checksum mismatch"},
      {ErrorCode::kPeerFailed, StatusCode::kNetworkError, "a failed peer link"},
      {ErrorCode::kThrottled, StatusCode::kBusy, "throttling after failed authentications"},
  };
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  for (const Case& expected : cases) {
    EXPECT_EQ(status_code_of(expected.error), expected.status) << static_cast<uint32_t>(expected.error);
    const std::string reason = "worker's reason for code " + std::to_string(static_cast<uint32_t>(expected.error));
    pair->server->write_error(expected.error, reason);
    Result<FrameHeader> reply = read_reply_header(*pair->client, {MessageType::kStats});
    ASSERT_FALSE(reply) << expected.phrase;
    EXPECT_EQ(reply.status().code(), expected.status) << reply.status().to_string();
    EXPECT_TRUE(contains(reply.status().message(), pair->client->peer() + " reported " + expected.phrase + ": " + reason));
  }
  // Values outside the enum never decode, but the mapping stays total.
  EXPECT_EQ(status_code_of(static_cast<ErrorCode>(99)), StatusCode::kInternal);
  EXPECT_EQ(peer_error_status(Error{ErrorCode::kBusy, ""}, "10.0.0.7:7070").message(), "10.0.0.7:7070 reported busy");
}

TEST(Request, AnExpectedErrorIsReturnedAsAFrame) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->server->write_error(ErrorCode::kBusy, "serving someone else");
  Result<FrameHeader> header = read_reply_header(*pair->client, {MessageType::kBye, MessageType::kError});
  ASSERT_TRUE(header) << header.status().to_string();
  ASSERT_EQ(header->type, static_cast<uint16_t>(MessageType::kError));
  Result<IncomingFrame> frame = pair->client->read_payload(*header);
  ASSERT_TRUE(frame) << frame.status().to_string();
  EXPECT_EQ(std::get<Error>(frame->message), (Error{ErrorCode::kBusy, "serving someone else"}));
}

TEST(Request, AnUnexpectedTypeIsAProtocolErrorNamingBothTypes) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  ASSERT_TRUE(write_service_frame(*pair->server, MessageType::kCredit, 24).is_ok());
  Result<FrameHeader> stats = read_reply_header(*pair->client, {MessageType::kStats});
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.status().code(), StatusCode::kProtocolError);
  EXPECT_TRUE(contains(stats.status().message(), pair->client->peer() + " sent CREDIT where STATS was expected"));

  // The unexpected frame's payload was left unread: the stream is out of step, so a fresh one.
  auto second = make_loopback();
  ASSERT_TRUE(second);
  ASSERT_TRUE(write_service_frame(*second->server, MessageType::kStats, 56).is_ok());
  Result<FrameHeader> header = read_reply_header(*second->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_FALSE(header);
  EXPECT_EQ(header.status().code(), StatusCode::kProtocolError);
  EXPECT_TRUE(contains(header.status().message(), "sent STATS where CREDIT or RESULT was expected"));
}

TEST(Request, APeerThatClosesIsANetworkError) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->server.reset();
  Result<FrameHeader> stats = read_reply_header(*pair->client, {MessageType::kStats});
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.status().code(), StatusCode::kNetworkError) << stats.status().to_string();
  EXPECT_TRUE(contains(stats.status().message(), pair->client->peer()));
}

TEST(Request, AGarbledReplyIsAProtocolError) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const std::array<std::byte, kHeaderSize> junk{};  // wrong magic
  const asio::const_buffer part = asio::buffer(junk);
  ASSERT_TRUE(pair->server->write_buffers(std::span(&part, 1)).is_ok());
  Result<FrameHeader> stats = read_reply_header(*pair->client, {MessageType::kStats});
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.status().code(), StatusCode::kProtocolError) << stats.status().to_string();
}

// What a worker does with a STORE over its memory cap: ERROR, then close without reading the
// data, so the sender's write fails before it ever reads the answer.
TEST(Request, APartingErrorExplainsAFailedWrite) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  ASSERT_TRUE(write_service_frame(*pair->server, MessageType::kCredit, 24).is_ok());  // skipped unallocated
  pair->server->write_error(ErrorCode::kOutOfMemory, "STORE of 64 MiB exceeds the 1 MiB tile memory cap");
  pair->server.reset();

  const std::vector<double> large((64u << 20) / sizeof(double), 1.0);
  const std::array<asio::const_buffer, 1> parts{asio::buffer(large)};  // what a STORE's data would be
  FrameHeader store;
  store.type = static_cast<uint16_t>(MessageType::kStore);
  const Status written = pair->client->write_frame(store, parts);
  ASSERT_FALSE(written.is_ok()) << "64 MiB into a closed connection";
  EXPECT_EQ(written.code(), StatusCode::kNetworkError) << written.to_string();

  const std::optional<Status> parting = read_parting_error(*pair->client);
  ASSERT_TRUE(parting.has_value());
  EXPECT_EQ(parting->code(), StatusCode::kResourceExhausted) << parting->to_string();
  EXPECT_TRUE(contains(parting->message(), pair->client->peer() + " reported out of memory: STORE of 64 MiB"));
}

TEST(Request, NoPartingErrorWhenThePeerLeftWithoutOne) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  ASSERT_TRUE(write_service_frame(*pair->server, MessageType::kCredit, 24).is_ok());
  pair->server.reset();
  EXPECT_FALSE(read_parting_error(*pair->client).has_value());
}

TEST(Request, APartingErrorNeverWaitsOnALiveConnection) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  // The peer is still there and silent: the local shutdown ends the read at once.
  EXPECT_FALSE(read_parting_error(*pair->client).has_value());
  EXPECT_FALSE(pair->client->write_message(Bye{}).is_ok());
}

}  // namespace
}  // namespace tessera::transport
