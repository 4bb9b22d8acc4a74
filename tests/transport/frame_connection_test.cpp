#include "tessera/transport/frame_connection.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "alloc_counter.hpp"
#include "frame_samples.hpp"
#include "loopback.hpp"
#include "tessera/transport/crc32c.hpp"

namespace tessera::transport {
namespace {

using namespace std::chrono_literals;
using testing::AllocationCounter;
using testing::counted;
using testing::kSmallAllocation;
using testing::make_loopback;
using testing::PeerThread;

// A frame of a service's type with `bytes` as its payload, written raw: transport frames it without
// knowing its layout (the GEMM service's STORE and friends are tests/gemm/wire_io_test.cpp's).
Status write_service_frame(FrameConnection& connection, MessageType type, const std::vector<std::byte>& bytes,
                           uint64_t request_id = 0) {
  const std::array<asio::const_buffer, 1> parts = {asio::buffer(bytes)};
  FrameHeader header;
  header.type = static_cast<uint16_t>(type);
  header.request_id = request_id;
  return connection.write_frame(header, parts);
}

std::vector<std::byte> numbered_bytes(std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(i * 7 + i / 251);
  return bytes;
}

TEST(FrameConnection, CarriesEverySessionMessage) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const std::vector<Message> messages = testing::sample_messages();

  Status writer_status;
  PeerThread writer(*pair->server, [&] {
    for (std::size_t i = 0; i < messages.size() && writer_status.is_ok(); ++i) {
      writer_status = pair->server->write_message(messages[i], 1000 + i, static_cast<uint32_t>(i));
    }
  });

  for (std::size_t i = 0; i < messages.size(); ++i) {
    Result<IncomingFrame> frame = pair->client->read_frame();
    ASSERT_TRUE(frame) << frame.status().to_string();
    EXPECT_EQ(frame->header.request_id, 1000 + i);
    EXPECT_EQ(frame->header.flags, i);
    EXPECT_EQ(frame->header.type, static_cast<uint16_t>(message_type(messages[i])));
    EXPECT_TRUE(testing::same_message(frame->message, messages[i])) << message_type_name(frame->header.type);
    EXPECT_EQ(frame->payload, encode_payload(messages[i]));
  }

  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();
  EXPECT_EQ(pair->server->bytes_sent(), pair->client->bytes_received());
}

// A service's frame is framed like any other; the connection reads its header and leaves the
// payload to the service's codec (read_payload refuses to decode it, before reading anything).
TEST(FrameConnection, AServicesFrameIsLeftToItsCodec) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const std::vector<std::byte> payload = numbered_bytes(517 * 389 * 8);  // ~1.6 MB: partial writes
  Status writer_status;
  PeerThread writer(*pair->client, [&] {
    writer_status = write_service_frame(*pair->client, MessageType::kStore, payload, 3);
    if (writer_status.is_ok()) writer_status = pair->client->write_message(Bye{});
  });

  Result<FrameHeader> header = pair->server->read_header();
  ASSERT_TRUE(header) << header.status().to_string();
  EXPECT_EQ(header->type, static_cast<uint16_t>(MessageType::kStore));
  EXPECT_EQ(header->payload_length, payload.size());
  EXPECT_EQ(header->request_id, 3u);
  const uint64_t received_before = pair->server->bytes_received();
  Result<IncomingFrame> refused = pair->server->read_payload(*header);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kProtocolError) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("STORE is a service's message; read it with that service's codec"),
            std::string::npos)
      << refused.status().to_string();
  EXPECT_EQ(pair->server->bytes_received(), received_before) << "nothing of the payload is read";

  // The payload is still there for its codec: in chunks, into a buffer that grows as it arrives.
  std::vector<std::byte> landed;
  ASSERT_TRUE(pair->server->read_growing(landed, header->payload_length).is_ok());
  EXPECT_EQ(landed, payload);
  Result<IncomingFrame> bye = pair->server->read_frame();
  ASSERT_TRUE(bye) << bye.status().to_string();
  EXPECT_TRUE(std::holds_alternative<Bye>(bye->message));
  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();
  EXPECT_EQ(pair->client->bytes_sent(), 2 * kHeaderSize + payload.size());
  EXPECT_EQ(pair->server->bytes_received(), 2 * kHeaderSize + payload.size());
}

// A reader that stops reading leaves what it was sent unacknowledged once its own buffers are
// full; the writer can see that (the graph engine holds deltas back for such a link), and sees it
// drain to 0 once everything is read.
TEST(FrameConnection, UnacknowledgedBytesGrowWhileThePeerDoesNotRead) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->client->unacknowledged_bytes(), 0u);
  const std::vector<std::byte> payload = numbered_bytes(32u << 20);  // more than both sockets' buffers hold
  Status writer_status;
  PeerThread writer(*pair->client,
                    [&] { writer_status = write_service_frame(*pair->client, MessageType::kStore, payload, 1); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  uint64_t seen = 0;
  while (seen == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    seen = pair->client->unacknowledged_bytes();
  }
  EXPECT_GT(seen, 0u) << "the writer never saw unacknowledged bytes while nobody read";
  Result<FrameHeader> header = pair->server->read_header();
  ASSERT_TRUE(header) << header.status().to_string();
  std::vector<std::byte> landed;
  ASSERT_TRUE(pair->server->read_growing(landed, header->payload_length).is_ok());
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
  const std::vector<std::byte> bulk = numbered_bytes(64 * 33 * 8);

  std::atomic<int> failures{0};
  auto write_many = [&](uint64_t base) {
    for (int i = 0; i < kFramesPerWriter; ++i) {
      const uint64_t id = base + static_cast<uint64_t>(i);
      const Status status =
          i % 3 == 0 ? write_service_frame(*pair->client, MessageType::kStore, bulk, id)
                     : pair->client->write_message(Error{ErrorCode::kInternal, "frame " + std::to_string(id)}, id);
      if (!status.is_ok()) ++failures;
    }
  };
  PeerThread first(*pair->client, [&] { write_many(0); });
  PeerThread second(*pair->client, [&] { write_many(1 << 20); });

  std::map<uint64_t, int> seen;
  for (int i = 0; i < 2 * kFramesPerWriter; ++i) {
    Result<FrameHeader> header = pair->server->read_header();
    ASSERT_TRUE(header) << "frame " << i << ": " << header.status().to_string();
    ++seen[header->request_id];
    if (is_session_message(header->type)) {
      Result<IncomingFrame> frame = pair->server->read_payload(*header);
      ASSERT_TRUE(frame) << "frame " << i << ": " << frame.status().to_string();
      const auto* error = std::get_if<Error>(&frame->message);
      ASSERT_NE(error, nullptr);
      EXPECT_EQ(error->message, "frame " + std::to_string(header->request_id));
    } else {
      std::vector<std::byte> landed;
      ASSERT_TRUE(pair->server->read_growing(landed, header->payload_length).is_ok());
      EXPECT_EQ(landed, bulk) << "frame " << i;
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
  const auto [status, allocated] = counted([&] { return pair->server->read_payload(header).status(); });
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
  // A HELLO whose header claims more than its three strings at their limit and a load can measure.
  // (A STORE whose prefix lies is the GEMM codec's to refuse: tests/gemm/wire_io_test.cpp.)
  FrameHeader lying_hello;
  lying_hello.type = static_cast<uint16_t>(MessageType::kHello);
  lying_hello.payload_length = kHelloFixedBytes + 3 * 4096 + kHelloLoadBytes + 1;
  const auto hello_bytes = encode_header(lying_hello);
  const std::array<std::byte, 48> filler{};

  for (int round = 0; round < 2; ++round) {
    Status write_status;
    if (round == 0) {
      const std::array<asio::const_buffer, 1> parts = {asio::buffer(huge_bytes)};
      write_status = pair->client->write_buffers(parts);
    } else {
      const std::array<asio::const_buffer, 2> parts = {asio::buffer(hello_bytes), asio::buffer(filler)};
      write_status = pair->client->write_buffers(parts);
    }
    ASSERT_TRUE(write_status.is_ok()) << write_status.to_string();
    const auto [status, allocated] = counted([&] { return pair->server->read_frame().status(); });
    EXPECT_EQ(status.code(), StatusCode::kProtocolError) << status.to_string();
    EXPECT_LT(allocated, kSmallAllocation) << "round " << round;
    if (round == 0) {
      EXPECT_NE(status.message().find("STORE: payload_length 9223372036854775808 exceeds the limit"), std::string::npos)
          << status.to_string();
    } else {
      EXPECT_NE(status.message().find("HELLO: payload_length 12365 out of range 72..12364"), std::string::npos)
          << status.to_string();
      // The rest of the lying frame is still unread; a session would close here.
    }
  }
}

// A header that claims the most a frame may carry, with only 49 bytes behind it before the peer
// closes: the reader must not allocate the claim, only (at most) one read chunk.
TEST(FrameConnection, ALyingLengthCostsAtMostOneChunk) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kGraphLoad);  // only max_payload_bytes bounds it here
  header.payload_length = Limits{}.max_payload_bytes;
  const auto header_bytes = encode_header(header);
  const std::vector<std::byte> behind(49, std::byte{0});
  const std::array<asio::const_buffer, 2> parts = {asio::buffer(header_bytes), asio::buffer(behind)};
  ASSERT_TRUE(pair->client->write_buffers(parts).is_ok());
  pair->client->shutdown();
  Result<FrameHeader> read = pair->server->read_header();
  ASSERT_TRUE(read) << read.status().to_string();
  const auto [status, allocated] = counted([&] {
    std::vector<std::byte> payload;
    return pair->server->read_growing(payload, read->payload_length);
  });
  EXPECT_EQ(status.code(), StatusCode::kNetworkError) << status.to_string();
  EXPECT_LE(allocated, FrameConnection::kReadChunkBytes + kSmallAllocation);
}

TEST(FrameConnection, ReadChecksummedComputesTheCrcOfWhatArrived) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const std::vector<std::byte> payload = numbered_bytes(3 * FrameConnection::kReadChunkBytes + 17);
  Status writer_status;
  PeerThread writer(*pair->client,
                    [&] { writer_status = write_service_frame(*pair->client, MessageType::kStore, payload); });
  Result<FrameHeader> header = pair->server->read_header();
  ASSERT_TRUE(header) << header.status().to_string();
  std::vector<std::byte> landed(header->payload_length);
  std::vector<std::size_t> progress;
  Result<uint32_t> crc = pair->server->read_checksummed(landed, [&](std::size_t so_far) { progress.push_back(so_far); });
  ASSERT_TRUE(crc) << crc.status().to_string();
  EXPECT_EQ(*crc, crc32c(payload));
  EXPECT_EQ(landed, payload);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), payload.size());
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
  writer.join();
  EXPECT_TRUE(writer_status.is_ok()) << writer_status.to_string();
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
