#include "tessera/transport/frame_connection.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "alloc_counter.hpp"
#include "frame_samples.hpp"
#include "loopback.hpp"

namespace tessera::transport {
namespace {

using namespace std::chrono_literals;
using testing::AllocationCounter;
using testing::kSmallAllocation;
using testing::make_loopback;
using testing::PeerThread;

Status write_store(FrameConnection& connection, const TilePrefix& tile, const std::vector<double>& data,
                   uint64_t request_id = 0) {
  const auto prefix = encode_store_prefix(testing::with_crc(tile, data));
  const std::array<asio::const_buffer, 2> parts = {asio::buffer(prefix), asio::buffer(data)};
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  header.request_id = request_id;
  return connection.write_frame(header, parts);
}

TEST(FrameConnection, CarriesEveryMessageKind) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const std::vector<Message> messages = testing::sample_messages();
  const TilePrefix store_tile{5, 4, 3};
  const std::vector<double> store_data = testing::sample_tile_data(store_tile);
  const TilePrefix result_tile{6, 2, 7};
  const std::vector<double> result_data = testing::sample_tile_data(result_tile);

  Status writer_status;
  PeerThread writer(*pair->server, [&] {
    for (std::size_t i = 0; i < messages.size() && writer_status.is_ok(); ++i) {
      writer_status = pair->server->write_message(messages[i], 1000 + i);
    }
    if (writer_status.is_ok()) writer_status = write_store(*pair->server, store_tile, store_data, 1);
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
    Result<IncomingFrame> frame = pair->client->read_frame();
    ASSERT_TRUE(frame) << frame.status().to_string();
    EXPECT_EQ(frame->header.request_id, 1000 + i);
    EXPECT_EQ(frame->header.type, static_cast<uint16_t>(message_type(messages[i])));
    EXPECT_TRUE(testing::same_message(frame->message, messages[i])) << message_type_name(frame->header.type);
  }
  Result<IncomingFrame> store_frame = pair->client->read_frame();
  ASSERT_TRUE(store_frame) << store_frame.status().to_string();
  const auto* store = std::get_if<Store>(&store_frame->message);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->tile, testing::with_crc(store_tile, store_data));
  EXPECT_TRUE(std::equal(store_data.begin(), store_data.end(), store->data.begin(), store->data.end()));

  Result<IncomingFrame> result_frame = pair->client->read_frame();
  ASSERT_TRUE(result_frame) << result_frame.status().to_string();
  const auto* result = std::get_if<ResultTile>(&result_frame->message);
  ASSERT_NE(result, nullptr);
  EXPECT_EQ(result->job_id, 77u);
  EXPECT_EQ(result->compute_seconds, 0.5);
  EXPECT_EQ(result->tile, testing::with_crc(result_tile, result_data));
  EXPECT_TRUE(std::equal(result_data.begin(), result_data.end(), result->data.begin(), result->data.end()));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(result_frame->payload.data()) % 16, 0u);

  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();
  EXPECT_EQ(pair->server->bytes_sent(), pair->client->bytes_received());
}

TEST(FrameConnection, ScatterGatherStoreStraightFromAVector) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const TilePrefix tile{31, 517, 389};  // ~1.6 MB, more than a socket buffer, so writes are partial
  const std::vector<double> data = testing::sample_tile_data(tile);

  Status writer_status;
  PeerThread writer(*pair->client, [&] { writer_status = write_store(*pair->client, tile, data, 3); });

  Result<IncomingFrame> frame = pair->server->read_frame();
  ASSERT_TRUE(frame) << frame.status().to_string();
  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();

  EXPECT_EQ(frame->header.payload_length, store_payload_bytes(tile));
  EXPECT_EQ(frame->header.request_id, 3u);
  const auto* store = std::get_if<Store>(&frame->message);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->tile.tile_id, tile.tile_id);
  EXPECT_EQ(store->tile.data_crc32c, tile_crc32c(store->data));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(store->data.data()) % 16, 0u);
  EXPECT_EQ(static_cast<const void*>(store->data.data()),
            static_cast<const void*>(frame->payload.data() + kTilePrefixSize));
  ASSERT_EQ(store->data.size(), data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), store->data.begin()));
  EXPECT_EQ(pair->client->bytes_sent(), kHeaderSize + store_payload_bytes(tile));
  EXPECT_EQ(pair->server->bytes_received(), kHeaderSize + store_payload_bytes(tile));
}

// A reader that stops reading leaves what it was sent unacknowledged once its own buffers are
// full; the writer can see that (the graph engine holds deltas back for such a link), and sees it
// drain to 0 once everything is read.
TEST(FrameConnection, UnacknowledgedBytesGrowWhileThePeerDoesNotRead) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->client->unacknowledged_bytes(), 0u);
  const TilePrefix tile{7, 2048, 2048};  // 32 MiB: more than both sockets' buffers hold
  const std::vector<double> data = testing::sample_tile_data(tile);
  Status writer_status;
  PeerThread writer(*pair->client, [&] { writer_status = write_store(*pair->client, tile, data, 1); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  uint64_t seen = 0;
  while (seen == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    seen = pair->client->unacknowledged_bytes();
  }
  EXPECT_GT(seen, 0u) << "the writer never saw unacknowledged bytes while nobody read";
  Result<IncomingFrame> frame = pair->server->read_frame();
  ASSERT_TRUE(frame) << frame.status().to_string();
  writer.join();
  ASSERT_TRUE(writer_status.is_ok()) << writer_status.to_string();
  uint64_t left = pair->client->unacknowledged_bytes();
  while (left != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    left = pair->client->unacknowledged_bytes();
  }
  EXPECT_EQ(left, 0u);
}

TEST(FrameConnection, ConcurrentWritersKeepFramesWhole) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  constexpr int kFramesPerWriter = 150;
  const TilePrefix tile{1, 64, 33};
  const std::vector<double> data = testing::sample_tile_data(tile);

  std::atomic<int> failures{0};
  auto write_many = [&](uint64_t base) {
    for (int i = 0; i < kFramesPerWriter; ++i) {
      Job job;
      job.job_id = base + static_cast<uint64_t>(i);
      job.m = job.n = job.k = 1;
      const Status status = i % 3 == 0 ? write_store(*pair->client, tile, data, base + static_cast<uint64_t>(i))
                                       : pair->client->write_message(job, base + static_cast<uint64_t>(i));
      if (!status.is_ok()) ++failures;
    }
  };
  PeerThread first(*pair->client, [&] { write_many(0); });
  PeerThread second(*pair->client, [&] { write_many(1 << 20); });

  std::map<uint64_t, int> seen;
  for (int i = 0; i < 2 * kFramesPerWriter; ++i) {
    Result<IncomingFrame> frame = pair->server->read_frame();
    ASSERT_TRUE(frame) << "frame " << i << ": " << frame.status().to_string();
    ++seen[frame->header.request_id];
    if (const auto* job = std::get_if<Job>(&frame->message)) {
      EXPECT_EQ(job->job_id, frame->header.request_id);
    }
  }
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(seen.size(), 2u * kFramesPerWriter);
}

TEST(FrameConnection, ReadPayloadOverLimitFailsBeforeAllocating) {
  Limits limits;
  limits.max_payload_bytes = 1 << 20;
  auto pair = make_loopback({}, limits);
  ASSERT_TRUE(pair);

  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  header.payload_length = 1ull << 40;
  Status status;
  uint64_t allocated = 0;
  {
    AllocationCounter counter;
    status = pair->server->read_payload(header).status();
    allocated = counter.bytes();
  }
  EXPECT_EQ(status.code(), StatusCode::kProtocolError) << status.to_string();
  EXPECT_NE(status.message().find("exceeds the limit of 1048576"), std::string::npos) << status.to_string();
  EXPECT_LT(allocated, kSmallAllocation);
}

TEST(FrameConnection, LyingFramesOnTheWireAreRejectedWithoutAllocation) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  // Header claims 2^63 bytes.
  FrameHeader huge;
  huge.type = static_cast<uint16_t>(MessageType::kStore);
  huge.payload_length = 1ull << 63;
  const auto huge_bytes = encode_header(huge);
  // Header is modest, the STORE prefix claims 1e6 x 1e6 doubles.
  FrameHeader modest;
  modest.type = static_cast<uint16_t>(MessageType::kStore);
  modest.payload_length = 64;
  const auto modest_bytes = encode_header(modest);
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
    Status status;
    uint64_t allocated = 0;
    {
      AllocationCounter counter;
      status = pair->server->read_frame().status();
      allocated = counter.bytes();
    }
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
TEST(FrameConnection, ALyingLengthCostsAtMostOneChunk) {
  const uint32_t rows = 16384, cols = 16383;  // 8 * rows * cols + 16 just under the 2 GiB limit
  const uint64_t store_claim = store_payload_bytes(TilePrefix{1, rows, cols});
  ASSERT_LE(store_claim, Limits{}.max_payload_bytes);
  ASSERT_GT(store_claim, uint64_t{2} << 30 >> 1);
  FrameHeader store;
  store.type = static_cast<uint16_t>(MessageType::kStore);
  store.payload_length = store_claim;
  FrameHeader probe;
  probe.type = static_cast<uint16_t>(MessageType::kProbe);
  probe.payload_length = kProbeFixedBytes + Limits{}.max_echo_bytes;
  for (const FrameHeader& header : {store, probe}) {
    SCOPED_TRACE(message_type_name(header.type));
    auto pair = make_loopback();
    ASSERT_TRUE(pair);
    const auto header_bytes = encode_header(header);
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
    Status status;
    uint64_t allocated = 0;
    {
      AllocationCounter counter;
      status = pair->server->read_frame().status();
      allocated = counter.bytes();
    }
    EXPECT_EQ(status.code(), StatusCode::kNetworkError) << status.to_string();
    EXPECT_LE(allocated, FrameConnection::kReadChunkBytes + kSmallAllocation);
  }
}

TEST(FrameConnection, DamagedTileDataIsRefusedByItsChecksum) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const TilePrefix tile{4, 300, 500};  // more than one read chunk
  std::vector<double> data = testing::sample_tile_data(tile);
  const TilePrefix sent = testing::with_crc(tile, data);
  data[100000] += 1.0;  // damaged after the CRC was taken, as on a bad link
  const auto prefix = encode_store_prefix(sent);
  const std::array<asio::const_buffer, 2> parts = {asio::buffer(prefix), asio::buffer(data)};
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  Status writer_status;
  PeerThread writer(*pair->client, [&] {
    writer_status = pair->client->write_frame(header, parts);
    if (writer_status.is_ok()) writer_status = pair->client->write_frame(header, parts);
  });
  // The whole-frame reader and the streaming reader both refuse it.
  const Status whole = pair->server->read_frame().status();
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
      pair->server->read_tile_data("STORE", *decoded, std::as_writable_bytes(std::span<double>(landing)));
  EXPECT_EQ(streamed.code(), StatusCode::kNetworkError);
  EXPECT_NE(streamed.message().find("checksum mismatch"), std::string::npos) << streamed.to_string();
  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();
}

TEST(FrameConnection, WriteMessageRefusesBulkMessages) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const Status status = pair->client->write_message(Store{});
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_EQ(pair->client->bytes_sent(), 0u);
}

TEST(FrameConnection, PeerNamesAndErrorFrames) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->client->peer(), "127.0.0.1:" + std::to_string(pair->port));
  EXPECT_EQ(pair->server->peer().rfind("127.0.0.1:", 0), 0u);

  pair->server->write_error(ErrorCode::kNoSuchTile, "tile 9 unknown", 42);
  Result<IncomingFrame> frame = pair->client->read_frame();
  ASSERT_TRUE(frame) << frame.status().to_string();
  EXPECT_EQ(frame->header.request_id, 42u);
  EXPECT_TRUE(testing::same_message(frame->message, Error{ErrorCode::kNoSuchTile, "tile 9 unknown"}));
}

TEST(FrameConnection, ClosedPeerIsANetworkError) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->client.reset();
  Result<IncomingFrame> frame = pair->server->read_frame();
  ASSERT_FALSE(frame);
  EXPECT_EQ(frame.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(frame.status().message().find("closed the connection"), std::string::npos) << frame.status().to_string();
}

TEST(FrameConnection, ShutdownUnblocksAReaderOnAnotherThread) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Status read_status;
  PeerThread reader(*pair->server, [&] { read_status = pair->server->read_frame().status(); });
  std::this_thread::sleep_for(50ms);
  pair->server->shutdown();
  reader.join();
  EXPECT_EQ(read_status.code(), StatusCode::kNetworkError) << read_status.to_string();
  EXPECT_FALSE(pair->server->write_message(Bye{}).is_ok());
}

TEST(FrameConnection, ConnectToAClosedPortNamesHostAndPort) {
  asio::io_context context;
  uint16_t port = 0;
  {
    asio::ip::tcp::acceptor acceptor(context, asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    port = acceptor.local_endpoint().port();
  }
  auto connection = FrameConnection::connect("127.0.0.1", port, 2s);
  ASSERT_FALSE(connection);
  EXPECT_EQ(connection.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(connection.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << connection.status().to_string();
}

TEST(FrameConnection, ConnectGivesUpAtTheDeadline) {
  // A listener that never accepts, with a backlog of 0: once its queue is full the kernel drops
  // further SYNs, so the next connect hangs until our deadline.
  asio::io_context context;
  asio::ip::tcp::acceptor acceptor(context);
  acceptor.open(asio::ip::tcp::v4());
  acceptor.bind(asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  acceptor.listen(0);
  const uint16_t port = acceptor.local_endpoint().port();

  std::vector<std::unique_ptr<FrameConnection>> queued;
  bool timed_out = false;
  for (int attempt = 0; attempt < 16 && !timed_out; ++attempt) {
    const auto start = std::chrono::steady_clock::now();
    auto connection = FrameConnection::connect("127.0.0.1", port, 300ms);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (connection) {
      queued.push_back(std::move(*connection));
      continue;
    }
    timed_out = true;
    EXPECT_EQ(connection.status().code(), StatusCode::kNetworkError);
    EXPECT_NE(connection.status().message().find("timed out after 300 ms"), std::string::npos)
        << connection.status().to_string();
    EXPECT_NE(connection.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
    EXPECT_GE(elapsed, 250ms);
    EXPECT_LT(elapsed, 3s);
  }
  EXPECT_TRUE(timed_out) << "the listen queue never filled; " << queued.size() << " connections were accepted";
}

TEST(FrameConnection, ConnectRejectsAnUnresolvableHost) {
  auto connection = FrameConnection::connect("bad host name!", 7070, 2s);
  ASSERT_FALSE(connection);
  EXPECT_EQ(connection.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(connection.status().message().find("bad host name!:7070"), std::string::npos)
      << connection.status().to_string();
}

}  // namespace
}  // namespace tessera::transport
