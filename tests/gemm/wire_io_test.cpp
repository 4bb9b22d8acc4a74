// The GEMM service's messages over real loopback connections: every kind written and read whole,
// bulk tiles straight from the caller's memory, writers on several threads, lying headers and
// prefixes refused before anything is allocated, damaged data refused by its checksum, and replies
// matched by type (a peer's ERROR as its Status).
#include "tessera/gemm/wire_io.hpp"

#include <gtest/gtest.h>

#include <tuple>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "../transport/alloc_counter.hpp"
#include "../transport/loopback.hpp"
#include "gemm_samples.hpp"

namespace tessera::gemm {
namespace {

using transport::FrameConnection;
using transport::testing::AllocationCounter;
using transport::testing::counted;
using transport::testing::kSmallAllocation;
using transport::testing::make_loopback;
using transport::testing::PeerThread;

// The next frame, which must be a GEMM message: header, then the codec's read.
Result<GemmFrame> read_gemm_frame(FrameConnection& connection) {
  Result<transport::FrameHeader> header = connection.read_header();
  if (!header) return header.status();
  return read_payload(connection, *header);
}

// A STORE under `tile` (its CRC filled in from `data`) written with write_store.
Status write_tile(FrameConnection& connection, const TilePrefix& tile, const std::vector<double>& data) {
  return write_store(connection, testing::with_crc(tile, data), data);
}

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

// --- Writing and reading every kind -------------------------------------------------------

TEST(GemmWire, CarriesEveryMessageKind) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const std::vector<GemmMessage> messages = testing::sample_messages();
  const TilePrefix store_tile{5, 4, 3};
  const std::vector<double> store_data = testing::sample_tile_data(store_tile);
  const TilePrefix result_tile{6, 2, 7};
  const std::vector<double> result_data = testing::sample_tile_data(result_tile);

  Status writer_status;
  PeerThread writer(*pair->server, [&] {
    for (std::size_t i = 0; i < messages.size() && writer_status.is_ok(); ++i) {
      writer_status = write_message(*pair->server, messages[i], 1000 + i, static_cast<uint32_t>(i));
    }
    if (writer_status.is_ok()) writer_status = write_tile(*pair->server, store_tile, store_data);
    if (writer_status.is_ok()) {
      const auto prefix = encode_result_prefix(77, 0.5, testing::with_crc(result_tile, result_data));
      const std::array<asio::const_buffer, 2> parts = {asio::buffer(prefix), asio::buffer(result_data)};
      FrameHeader header;
      header.type = static_cast<uint16_t>(MessageType::kResult);
      header.request_id = 2;
      writer_status = pair->server->write_frame(header, parts);
    }
  });

  for (std::size_t i = 0; i < messages.size(); ++i) {
    Result<GemmFrame> frame = read_gemm_frame(*pair->client);
    ASSERT_TRUE(frame) << frame.status().to_string();
    EXPECT_EQ(frame->header.request_id, 1000 + i);
    EXPECT_EQ(frame->header.flags, i);
    EXPECT_EQ(frame->header.type, static_cast<uint16_t>(gemm_message_type(messages[i])));
    EXPECT_TRUE(testing::same_message(frame->message, messages[i])) << transport::message_type_name(frame->header.type);
  }
  Result<GemmFrame> store_frame = read_gemm_frame(*pair->client);
  ASSERT_TRUE(store_frame) << store_frame.status().to_string();
  const auto* stored = std::get_if<Store>(&store_frame->message);
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(stored->tile, testing::with_crc(store_tile, store_data));
  EXPECT_TRUE(std::equal(store_data.begin(), store_data.end(), stored->data.begin(), stored->data.end()));

  Result<GemmFrame> result_frame = read_gemm_frame(*pair->client);
  ASSERT_TRUE(result_frame) << result_frame.status().to_string();
  const auto* result = std::get_if<ResultTile>(&result_frame->message);
  ASSERT_NE(result, nullptr);
  EXPECT_EQ(result_frame->header.request_id, 2u);
  EXPECT_EQ(result->job_id, 77u);
  EXPECT_EQ(result->compute_seconds, 0.5);
  EXPECT_EQ(result->tile, testing::with_crc(result_tile, result_data));
  EXPECT_TRUE(std::equal(result_data.begin(), result_data.end(), result->data.begin(), result->data.end()));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(result_frame->payload.data()) % 16, 0u);

  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();
  EXPECT_EQ(pair->server->bytes_sent(), pair->client->bytes_received());
}

TEST(GemmWire, ScatterGatherStoreStraightFromAVector) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const TilePrefix tile{31, 517, 389};  // ~1.6 MB, more than a socket buffer, so writes are partial
  const std::vector<double> data = testing::sample_tile_data(tile);

  Status writer_status;
  PeerThread writer(*pair->client, [&] { writer_status = write_tile(*pair->client, tile, data); });

  Result<GemmFrame> frame = read_gemm_frame(*pair->server);
  ASSERT_TRUE(frame) << frame.status().to_string();
  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();

  EXPECT_EQ(frame->header.type, static_cast<uint16_t>(MessageType::kStore));
  EXPECT_EQ(frame->header.payload_length, store_payload_bytes(tile));
  EXPECT_EQ(frame->header.request_id, 0u);  // write_store sends no request id
  const auto* stored = std::get_if<Store>(&frame->message);
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(stored->tile.tile_id, tile.tile_id);
  EXPECT_EQ(stored->tile.data_crc32c, tile_crc32c(stored->data));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(stored->data.data()) % 16, 0u);
  EXPECT_EQ(static_cast<const void*>(stored->data.data()),
            static_cast<const void*>(frame->payload.data() + kTilePrefixSize));
  ASSERT_EQ(stored->data.size(), data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), stored->data.begin()));
  EXPECT_EQ(pair->client->bytes_sent(), transport::kHeaderSize + store_payload_bytes(tile));
  EXPECT_EQ(pair->server->bytes_received(), transport::kHeaderSize + store_payload_bytes(tile));
}

TEST(GemmWire, ConcurrentWritersKeepFramesWhole) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  constexpr int kFramesPerWriter = 150;
  const TilePrefix tile{1, 64, 33};
  const std::vector<double> data = testing::sample_tile_data(tile);

  std::atomic<int> failures{0};
  // Every frame carries its number: a JOB as its request id and job id, a STORE as its tile id.
  auto write_many = [&](uint32_t base) {
    for (int i = 0; i < kFramesPerWriter; ++i) {
      const uint32_t number = base + static_cast<uint32_t>(i);
      Job job;
      job.job_id = number;
      job.m = job.n = job.k = 1;
      TilePrefix numbered = tile;
      numbered.tile_id = number;
      const Status status =
          i % 3 == 0 ? write_tile(*pair->client, numbered, data) : write_message(*pair->client, job, number);
      if (!status.is_ok()) ++failures;
    }
  };
  PeerThread first(*pair->client, [&] { write_many(0); });
  PeerThread second(*pair->client, [&] { write_many(1 << 20); });

  std::map<uint64_t, int> seen;
  for (int i = 0; i < 2 * kFramesPerWriter; ++i) {
    Result<GemmFrame> frame = read_gemm_frame(*pair->server);
    ASSERT_TRUE(frame) << "frame " << i << ": " << frame.status().to_string();
    if (const auto* job = std::get_if<Job>(&frame->message)) {
      EXPECT_EQ(job->job_id, frame->header.request_id);
      ++seen[job->job_id];
    } else if (const auto* stored = std::get_if<Store>(&frame->message)) {
      EXPECT_TRUE(std::equal(data.begin(), data.end(), stored->data.begin(), stored->data.end()));
      ++seen[stored->tile.tile_id];
    } else {
      ADD_FAILURE() << "frame " << i << " is " << transport::message_type_name(frame->header.type);
    }
  }
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(seen.size(), 2u * kFramesPerWriter);
}

TEST(GemmWire, WriteMessageRefusesBulkMessages) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  for (const GemmMessage& bulk : {GemmMessage(Store{}), GemmMessage(ResultTile{})}) {
    const Status status = write_message(*pair->client, bulk);
    EXPECT_EQ(status.code(), StatusCode::kInternal) << status.to_string();
    EXPECT_TRUE(contains(status.message(), "write_store")) << status.to_string();
  }
  EXPECT_EQ(pair->client->bytes_sent(), 0u);
}

// --- Reading bounded by the codec ---------------------------------------------------------

// The connection's limit first (a STORE claiming a terabyte), then the codec's own bound: a JOB is
// kJobPayloadBytes whatever the connection would carry, so a longer one is refused from its header.
TEST(GemmWire, ReadPayloadOverLimitFailsBeforeAllocating) {
  transport::Limits limits;
  limits.max_payload_bytes = 1 << 20;
  auto pair = make_loopback({}, limits);
  ASSERT_TRUE(pair);

  for (const auto& [type, length, needle] :
       {std::tuple{MessageType::kStore, uint64_t{1} << 40, "exceeds the limit of 1048576"},
        std::tuple{MessageType::kJob, uint64_t{1} << 19, "JOB"}}) {
    FrameHeader header;
    header.type = static_cast<uint16_t>(type);
    header.payload_length = length;
    const auto [status, allocated] = counted([&] { return read_payload(*pair->server, header).status(); });
    EXPECT_EQ(status.code(), StatusCode::kProtocolError) << status.to_string();
    EXPECT_NE(status.message().find(needle), std::string::npos) << status.to_string();
    EXPECT_LT(allocated, kSmallAllocation);
  }

  // Explicit limits are the caller's: the GEMM bounds a worker may lower.
  Limits small = limits_for(limits);
  small.max_tile_dim = 2;
  const std::vector<double> data(9, 1.0);
  ASSERT_TRUE(write_tile(*pair->client, TilePrefix{1, 3, 3}, data).is_ok());
  Result<transport::FrameHeader> sent = pair->server->read_header();
  ASSERT_TRUE(sent) << sent.status().to_string();
  const Status refused = read_payload(*pair->server, *sent, small).status();
  EXPECT_EQ(refused.code(), StatusCode::kProtocolError) << refused.to_string();
  EXPECT_TRUE(contains(refused.message(), "out of range")) << refused.to_string();
}

TEST(GemmWire, ReadPayloadRefusesAFrameThatIsNotTheGemmServicesBeforeReading) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  ASSERT_TRUE(pair->client->write_message(transport::Bye{}).is_ok());
  Result<transport::FrameHeader> header = pair->server->read_header();
  ASSERT_TRUE(header) << header.status().to_string();
  const Status status = read_payload(*pair->server, *header).status();
  EXPECT_EQ(status.code(), StatusCode::kProtocolError) << status.to_string();
  EXPECT_TRUE(contains(status.message(), "BYE is not a message of the GEMM service")) << status.to_string();
  EXPECT_TRUE(contains(status.message(), pair->server->peer())) << status.to_string();
}

TEST(GemmWire, AWrongLengthForItsTypeIsRefusedFromTheHeader) {
  // The frame header admits any length up to the frame limit for a service's type; the codec's
  // length check refuses a JOB that is not 72 bytes before anything is read.
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  FrameHeader job;
  job.type = static_cast<uint16_t>(MessageType::kJob);
  const std::vector<std::byte> oversized(1 << 20);
  const std::array<asio::const_buffer, 1> parts{asio::buffer(oversized)};
  PeerThread writer(*pair->client, [&] { (void)pair->client->write_frame(job, parts); });
  Result<transport::FrameHeader> header = pair->server->read_header();
  ASSERT_TRUE(header) << header.status().to_string();
  EXPECT_EQ(header->payload_length, oversized.size());
  const auto [status, allocated] = counted([&] { return read_payload(*pair->server, *header).status(); });
  EXPECT_EQ(status.code(), StatusCode::kProtocolError) << status.to_string();
  EXPECT_TRUE(contains(status.message(), "JOB: payload_length 1048576 out of range 72..72")) << status.to_string();
  EXPECT_LT(allocated, kSmallAllocation);
  pair->server->shutdown();
}

TEST(GemmWire, LyingFramesOnTheWireAreRejectedWithoutAllocation) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  // Header claims 2^63 bytes.
  FrameHeader huge;
  huge.type = static_cast<uint16_t>(MessageType::kStore);
  huge.payload_length = 1ull << 63;
  const auto huge_bytes = transport::encode_header(huge);
  // Header is modest, the STORE prefix claims 1e6 x 1e6 doubles.
  FrameHeader modest;
  modest.type = static_cast<uint16_t>(MessageType::kStore);
  modest.payload_length = 64;
  const auto modest_bytes = transport::encode_header(modest);
  const auto lying_prefix = encode_store_prefix(TilePrefix{1, 1000000, 1000000});
  const std::array<std::byte, 48> filler{};

  for (int round = 0; round < 2; ++round) {
    Status write_status;
    if (round == 0) {
      const std::array<asio::const_buffer, 1> parts = {asio::buffer(huge_bytes)};
      write_status = pair->client->write_buffers(parts);
    } else {
      const std::array<asio::const_buffer, 3> parts = {asio::buffer(modest_bytes), asio::buffer(lying_prefix),
                                                      asio::buffer(filler)};
      write_status = pair->client->write_buffers(parts);
    }
    ASSERT_TRUE(write_status.is_ok()) << write_status.to_string();
    const auto [status, allocated] = counted([&] { return read_gemm_frame(*pair->server).status(); });
    EXPECT_EQ(status.code(), StatusCode::kProtocolError) << status.to_string();
    EXPECT_LT(allocated, kSmallAllocation) << "round " << round;
    if (round == 1) {
      EXPECT_NE(status.message().find("does not match tile 1000000 x 1000000"), std::string::npos)
          << status.to_string();
      // The rest of the lying frame is still unread; a session would close here.
    }
  }
}

// A header that claims the most a frame may carry, with only 49 bytes behind it before the peer
// closes: the reader must not allocate the claim, only (at most) one read chunk.
TEST(GemmWire, ALyingLengthCostsAtMostOneChunk) {
  const uint32_t rows = 16384, cols = 16383;  // 8 * rows * cols + 16 just under the 2 GiB limit
  const uint64_t store_claim = store_payload_bytes(TilePrefix{1, rows, cols});
  ASSERT_LE(store_claim, Limits{}.max_payload_bytes);
  ASSERT_GT(store_claim, uint64_t{2} << 30 >> 1);
  FrameHeader store_header;
  store_header.type = static_cast<uint16_t>(MessageType::kStore);
  store_header.payload_length = store_claim;
  FrameHeader probe;
  probe.type = static_cast<uint16_t>(MessageType::kProbe);
  probe.payload_length = kProbeFixedBytes + Limits{}.max_echo_bytes;
  for (const FrameHeader& header : {store_header, probe}) {
    SCOPED_TRACE(transport::message_type_name(header.type));
    auto pair = make_loopback();
    ASSERT_TRUE(pair);
    const auto header_bytes = transport::encode_header(header);
    std::vector<std::byte> behind(49, std::byte{0});
    if (header.type == static_cast<uint16_t>(MessageType::kStore)) {
      const auto prefix = encode_store_prefix(TilePrefix{1, rows, cols});
      std::copy(prefix.begin(), prefix.end(), behind.begin());
    } else {
      behind[0] = std::byte{0};  // echo kind, size 0, 0 s, echo_length as claimed
      const uint32_t echo = Limits{}.max_echo_bytes;
      for (int i = 0; i < 4; ++i) behind[16 + static_cast<std::size_t>(i)] = static_cast<std::byte>(echo >> (8 * i));
    }
    const std::array<asio::const_buffer, 2> parts = {asio::buffer(header_bytes), asio::buffer(behind)};
    ASSERT_TRUE(pair->client->write_buffers(parts).is_ok());
    pair->client->shutdown();
    const auto [status, allocated] = counted([&] { return read_gemm_frame(*pair->server).status(); });
    EXPECT_EQ(status.code(), StatusCode::kNetworkError) << status.to_string();
    EXPECT_LE(allocated, FrameConnection::kReadChunkBytes + kSmallAllocation);
  }
}

TEST(GemmWire, DamagedTileDataIsRefusedByItsChecksum) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const TilePrefix tile{4, 300, 500};  // more than one read chunk
  std::vector<double> data = testing::sample_tile_data(tile);
  const TilePrefix sent = testing::with_crc(tile, data);
  data[100000] += 1.0;  // damaged after the CRC was taken, as on a bad link
  Status writer_status;
  PeerThread writer(*pair->client, [&] {
    writer_status = write_store(*pair->client, sent, data);
    if (writer_status.is_ok()) writer_status = write_store(*pair->client, sent, data);
  });
  // The whole-frame reader and the streaming reader both refuse it.
  const Status whole = read_gemm_frame(*pair->server).status();
  EXPECT_EQ(whole.code(), StatusCode::kNetworkError) << whole.to_string();
  EXPECT_NE(whole.message().find("STORE tile 4 (300 x 500): checksum mismatch"), std::string::npos) << whole.to_string();

  Result<FrameHeader> second = pair->server->read_header();
  ASSERT_TRUE(second) << second.status().to_string();
  std::array<std::byte, kTilePrefixSize> prefix_bytes{};
  ASSERT_TRUE(pair->server->read_exact(prefix_bytes).is_ok());
  Result<TilePrefix> decoded = decode_store_prefix(prefix_bytes, second->payload_length, {});
  ASSERT_TRUE(decoded);
  std::vector<double> landing(data.size());
  const Status streamed =
      read_tile_data(*pair->server, "STORE", *decoded, std::as_writable_bytes(std::span<double>(landing)));
  EXPECT_EQ(streamed.code(), StatusCode::kNetworkError);
  EXPECT_NE(streamed.message().find("STORE tile 4 (300 x 500): checksum mismatch"), std::string::npos)
      << streamed.to_string();
  EXPECT_NE(streamed.message().find(pair->server->peer()), std::string::npos) << streamed.to_string();
  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();
}

TEST(GemmWire, StreamedTileDataLandsWhereTheCallerSays) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const TilePrefix tile{12, 257, 301};  // more than one read chunk
  const std::vector<double> data = testing::sample_tile_data(tile);
  Status writer_status;
  PeerThread writer(*pair->client, [&] { writer_status = write_tile(*pair->client, tile, data); });
  Result<FrameHeader> header = pair->server->read_header();
  ASSERT_TRUE(header) << header.status().to_string();
  std::array<std::byte, kTilePrefixSize> prefix_bytes{};
  ASSERT_TRUE(pair->server->read_exact(prefix_bytes).is_ok());
  Result<TilePrefix> decoded = decode_store_prefix(prefix_bytes, header->payload_length, {});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(*decoded, testing::with_crc(tile, data));
  std::vector<double> landing(data.size());
  const Status streamed =
      read_tile_data(*pair->server, "STORE", *decoded, std::as_writable_bytes(std::span<double>(landing)));
  EXPECT_TRUE(streamed.is_ok()) << streamed.to_string();
  EXPECT_EQ(landing, data);
  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();
}

// --- Replies matched by type --------------------------------------------------------------

TEST(GemmReply, MessageTypeOfFollowsTheWireOrder) {
  static_assert(message_type_of<Probe>() == MessageType::kProbe);
  static_assert(message_type_of<ProbeResult>() == MessageType::kProbeResult);
  static_assert(message_type_of<Job>() == MessageType::kJob);
  static_assert(message_type_of<StatsRequest>() == MessageType::kStatsRequest);
  static_assert(message_type_of<Stats>() == MessageType::kStats);
  EXPECT_EQ(message_type_of<Credit>(), gemm_message_type(GemmMessage(Credit{})));
  EXPECT_EQ(message_type_of<Release>(), gemm_message_type(GemmMessage(Release{})));
}

TEST(GemmReply, ReturnsTheExpectedReply) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status peer_status = internal_error("peer did not run");
  PeerThread peer(*pair->server, [&] {
    Result<GemmFrame> probe = read_gemm_frame(*pair->server);
    if (!probe || !std::holds_alternative<Probe>(probe->message)) return;
    ProbeResult answer;
    answer.kind = ProbeKind::kEcho;
    answer.echo = std::get<Probe>(probe->message).echo;
    peer_status = write_message(*pair->server, answer);
    if (peer_status.is_ok()) peer_status = write_message(*pair->server, sample_stats());
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

TEST(GemmReply, ABulkReplyIsReadWholeAmongItsExpectedTypes) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const TilePrefix tile{9, 2, 3};
  const std::vector<double> data = {1, 2, 3, 4, 5, 6};
  const auto prefix = encode_result_prefix(41, 0.5, testing::with_crc(tile, data));
  const std::array<asio::const_buffer, 2> parts{asio::buffer(prefix), asio::buffer(data)};
  FrameHeader result_header;
  result_header.type = static_cast<uint16_t>(MessageType::kResult);
  ASSERT_TRUE(write_message(*pair->server, Credit{41, 1, 0.25}).is_ok());
  ASSERT_TRUE(pair->server->write_frame(result_header, parts).is_ok());

  Result<GemmFrame> credit = read_reply(*pair->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_TRUE(credit) << credit.status().to_string();
  EXPECT_EQ(std::get<Credit>(credit->message), (Credit{41, 1, 0.25}));

  Result<GemmFrame> result = read_reply(*pair->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_TRUE(result) << result.status().to_string();
  ASSERT_EQ(result->header.type, static_cast<uint16_t>(MessageType::kResult));
  EXPECT_EQ(result->header.payload_length, result_payload_bytes(tile));
  const auto& tile_result = std::get<ResultTile>(result->message);
  EXPECT_EQ(tile_result.job_id, 41u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), tile_result.data.begin(), tile_result.data.end()));
}

// read_reply_header leaves a bulk payload to the caller, who streams it into place.
TEST(GemmReply, ReplyHeaderLeavesABulkPayloadToTheCaller) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const TilePrefix tile{9, 2, 3};
  const std::vector<double> data = {1, 2, 3, 4, 5, 6};
  const auto prefix = encode_result_prefix(41, 0.5, tile);
  const std::array<asio::const_buffer, 2> parts{asio::buffer(prefix), asio::buffer(data)};
  FrameHeader result_header;
  result_header.type = static_cast<uint16_t>(MessageType::kResult);
  ASSERT_TRUE(write_message(*pair->server, Credit{41, 1, 0.25}).is_ok());
  ASSERT_TRUE(pair->server->write_frame(result_header, parts).is_ok());

  Result<FrameHeader> credit = transport::read_reply_header(*pair->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_TRUE(credit) << credit.status().to_string();
  EXPECT_EQ(credit->type, static_cast<uint16_t>(MessageType::kCredit));
  ASSERT_TRUE(read_payload(*pair->client, *credit));

  Result<FrameHeader> result = transport::read_reply_header(*pair->client, {MessageType::kCredit, MessageType::kResult});
  ASSERT_TRUE(result) << result.status().to_string();
  ASSERT_EQ(result->type, static_cast<uint16_t>(MessageType::kResult));
  EXPECT_EQ(result->payload_length, result_payload_bytes(tile));
  std::array<std::byte, kResultPrefixSize> prefix_bytes;
  ASSERT_TRUE(pair->client->read_exact(prefix_bytes).is_ok());
  std::vector<double> landed(data.size());
  ASSERT_TRUE(pair->client->read_exact(std::as_writable_bytes(std::span(landed))).is_ok());
  EXPECT_EQ(landed, data);
}

TEST(GemmReply, APeersErrorIsItsStatus) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->server->write_error(transport::ErrorCode::kOutOfMemory, "STORE of 64 MiB exceeds the cap");
  Result<Stats> reply = read_reply<Stats>(*pair->client);
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.status().code(), StatusCode::kResourceExhausted) << reply.status().to_string();
  EXPECT_TRUE(contains(reply.status().message(),
                       pair->client->peer() + " reported out of memory: STORE of 64 MiB exceeds the cap"));
}

TEST(GemmReply, AnUnexpectedTypeIsAProtocolErrorNamingBothTypes) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  ASSERT_TRUE(write_message(*pair->server, Credit{7, 1, 0.0}).is_ok());
  Result<Stats> stats = read_reply<Stats>(*pair->client);
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.status().code(), StatusCode::kProtocolError);
  EXPECT_TRUE(contains(stats.status().message(), pair->client->peer() + " sent CREDIT where STATS was expected"));
}

TEST(GemmReply, APeerThatClosesIsANetworkError) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->server.reset();
  Result<Stats> stats = request_reply<Stats>(*pair->client, StatsRequest{});
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.status().code(), StatusCode::kNetworkError) << stats.status().to_string();
  EXPECT_TRUE(contains(stats.status().message(), pair->client->peer()));
}

TEST(GemmReply, AGarbledReplyIsAProtocolError) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const std::array<std::byte, transport::kHeaderSize> junk{};  // wrong magic
  const asio::const_buffer part = asio::buffer(junk);
  ASSERT_TRUE(pair->server->write_buffers(std::span(&part, 1)).is_ok());
  Result<Stats> stats = read_reply<Stats>(*pair->client);
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.status().code(), StatusCode::kProtocolError) << stats.status().to_string();
}

// --- Forwarding messages ------------------------------------------------------------------

TEST(GemmForwardWire, ForwardingMessagesRoundTripOverAConnection) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const std::vector<ForwardMessage> messages = {ForwardSetup{7, 16, 48, "pi-3.local", 7003}, ForwardReady{7, true, ""},
                                                Stored{7, 31}, SendTile{7, 3, "10.77.0.3", 7003},
                                                Sent{7, 3, false, "10.77.0.3:7003: connection refused"}};
  for (std::size_t i = 0; i < messages.size(); ++i) {
    ASSERT_TRUE(write_forward_message(*pair->client, messages[i], 50 + i).is_ok());
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    Result<FrameHeader> header = pair->server->read_header();
    ASSERT_TRUE(header) << header.status().to_string();
    EXPECT_EQ(header->request_id, 50 + i);
    EXPECT_EQ(header->type, static_cast<uint16_t>(forward_message_type(messages[i])));
    Result<ForwardMessage> message = read_forward_payload(*pair->server, *header);
    ASSERT_TRUE(message) << message.status().to_string();
    EXPECT_EQ(*message, messages[i]);
  }
  // A type that is not a forwarding one is refused before its payload is read.
  ASSERT_TRUE(write_message(*pair->client, Credit{1, 1, 0.0}).is_ok());
  Result<FrameHeader> credit = pair->server->read_header();
  ASSERT_TRUE(credit) << credit.status().to_string();
  const Status refused = read_forward_payload(*pair->server, *credit).status();
  EXPECT_EQ(refused.code(), StatusCode::kProtocolError) << refused.to_string();
  EXPECT_TRUE(contains(refused.message(), pair->server->peer())) << refused.to_string();
}

}  // namespace
}  // namespace tessera::gemm
