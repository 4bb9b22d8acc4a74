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

Stats sample_stats() {
  Stats stats;
  stats.session_seconds = 2.5;
  stats.io_cpu_seconds = 0.25;
  stats.compute_cpu_seconds = 1.75;
  stats.compute_wall_seconds = 1.8;
  stats.jobs = 12;
  stats.bytes_received = 4096;
  stats.bytes_sent = 512;
  return stats;
}

TEST(Request, MessageTypeOfFollowsTheWireOrder) {
  static_assert(message_type_of<Hello>() == MessageType::kHello);
  static_assert(message_type_of<ProbeResult>() == MessageType::kProbeResult);
  static_assert(message_type_of<Error>() == MessageType::kError);
  static_assert(message_type_of<Stats>() == MessageType::kStats);
  EXPECT_EQ(message_type_of<Credit>(), message_type(Message(Credit{})));
  EXPECT_EQ(message_type_of<Release>(), message_type(Message(Release{})));
}

TEST(Request, ReturnsTheExpectedReply) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status peer_status = internal_error("peer did not run");
  PeerThread peer(*pair->server, [&] {
    Result<IncomingFrame> probe = pair->server->read_frame();
    if (!probe || !std::holds_alternative<Probe>(probe->message)) return;
    ProbeResult answer;
    answer.kind = ProbeKind::kEcho;
    answer.echo = std::get<Probe>(probe->message).echo;
    peer_status = pair->server->write_message(answer);
    if (peer_status.is_ok()) peer_status = pair->server->write_message(sample_stats());
  });

  Probe echo;
  echo.kind = ProbeKind::kEcho;
  echo.echo = {1, 2, 3};
  Result<ProbeResult> answer = request_reply<ProbeResult>(*pair->client, echo);
  ASSERT_TRUE(answer) << answer.status().to_string();
  EXPECT_EQ(answer->kind, ProbeKind::kEcho);
  EXPECT_EQ(answer->echo, echo.echo);

  Result<Stats> stats = read_reply<Stats>(*pair->client);
  ASSERT_TRUE(stats) << stats.status().to_string();
  EXPECT_EQ(*stats, sample_stats());
  peer.join();
  EXPECT_TRUE(peer_status.is_ok()) << peer_status.to_string();
}

TEST(Request, ReplyHeaderLeavesABulkPayloadToTheCaller) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const TilePrefix tile{9, 2, 3};
  const std::vector<double> data = {1, 2, 3, 4, 5, 6};
  const auto prefix = encode_result_prefix(41, 0.5, tile);
  const std::array<asio::const_buffer, 2> parts{asio::buffer(prefix), asio::buffer(data)};
  FrameHeader result_header;
  result_header.type = static_cast<uint16_t>(MessageType::kResult);
  ASSERT_TRUE(pair->server->write_message(Credit{41, 1, 0.25}).is_ok());
  ASSERT_TRUE(pair->server->write_frame(result_header, parts).is_ok());

  Result<FrameHeader> credit = read_reply_header(*pair->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_TRUE(credit) << credit.status().to_string();
  EXPECT_EQ(credit->type, static_cast<uint16_t>(MessageType::kCredit));
  ASSERT_TRUE(pair->client->read_payload(*credit));

  Result<FrameHeader> result = read_reply_header(*pair->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_TRUE(result) << result.status().to_string();
  ASSERT_EQ(result->type, static_cast<uint16_t>(MessageType::kResult));
  EXPECT_EQ(result->payload_length, result_payload_bytes(tile));
  std::array<std::byte, kResultPrefixSize> prefix_bytes;
  ASSERT_TRUE(pair->client->read_exact(prefix_bytes).is_ok());
  std::vector<double> landed(data.size());
  ASSERT_TRUE(pair->client->read_exact(std::as_writable_bytes(std::span(landed))).is_ok());
  EXPECT_EQ(landed, data);
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
    Result<Stats> reply = read_reply<Stats>(*pair->client);
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
  Result<IncomingFrame> frame = read_reply(*pair->client, {MessageType::kBye, MessageType::kError});
  ASSERT_TRUE(frame) << frame.status().to_string();
  EXPECT_EQ(std::get<Error>(frame->message), (Error{ErrorCode::kBusy, "serving someone else"}));
}

TEST(Request, AnUnexpectedTypeIsAProtocolErrorNamingBothTypes) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  ASSERT_TRUE(pair->server->write_message(Credit{7, 1, 0.0}).is_ok());
  Result<Stats> stats = read_reply<Stats>(*pair->client);
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.status().code(), StatusCode::kProtocolError);
  EXPECT_TRUE(contains(stats.status().message(), pair->client->peer() + " sent CREDIT where STATS was expected"));

  // The unexpected frame's payload was left unread: the stream is out of step, so a fresh one.
  auto second = make_loopback();
  ASSERT_TRUE(second);
  ASSERT_TRUE(second->server->write_message(sample_stats()).is_ok());
  Result<FrameHeader> header = read_reply_header(*second->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_FALSE(header);
  EXPECT_EQ(header.status().code(), StatusCode::kProtocolError);
  EXPECT_TRUE(contains(header.status().message(), "sent STATS where CREDIT or RESULT was expected"));
}

TEST(Request, APeerThatClosesIsANetworkError) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->server.reset();
  Result<Stats> stats = request_reply<Stats>(*pair->client, StatsRequest{});
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
  Result<Stats> stats = read_reply<Stats>(*pair->client);
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.status().code(), StatusCode::kProtocolError) << stats.status().to_string();
}

// What a worker does with a STORE over its memory cap: ERROR, then close without reading the
// data, so the sender's write fails before it ever reads the answer.
TEST(Request, APartingErrorExplainsAFailedWrite) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  ASSERT_TRUE(pair->server->write_message(Credit{3, 1, 0.1}).is_ok());
  pair->server->write_error(ErrorCode::kOutOfMemory, "STORE of 64 MiB exceeds the 1 MiB tile memory cap");
  pair->server.reset();

  const std::vector<double> large((64u << 20) / sizeof(double), 1.0);
  const TilePrefix tile{1, static_cast<uint32_t>(large.size() / 1024), 1024};
  const auto prefix = encode_store_prefix(tile);
  const std::array<asio::const_buffer, 2> parts{asio::buffer(prefix), asio::buffer(large)};
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
  ASSERT_TRUE(pair->server->write_message(Credit{3, 1, 0.1}).is_ok());
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
