// Read bounds of FrameConnection: a silent peer fails a bounded read with a message naming it,
// a slow but live peer does not, and the handshake gives up on a worker that says nothing.
// Bounds are generous and only upper limits are asserted: these run on loaded machines.
#include "tessera/transport/frame_connection.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <thread>

#include "loopback.hpp"

namespace tessera::transport {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TEST(ReadDeadline, SilentPeerFailsABoundedReadNamingIt) {
  auto pair = testing::make_loopback();
  ASSERT_NE(pair, nullptr);
  pair->server->set_read_timeout(milliseconds(300));
  const auto start = Clock::now();
  Result<IncomingFrame> frame = pair->server->read_frame();
  ASSERT_FALSE(frame.is_ok());
  EXPECT_EQ(frame.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(frame.status().message().find("no frame from " + pair->server->peer() + " for 0.3 s"), std::string::npos)
      << frame.status().message();
  EXPECT_GE(seconds_since(start), 0.25);
  EXPECT_LT(seconds_since(start), 10.0);
}

TEST(ReadDeadline, IdleBoundRestartsWithEveryByte) {
  auto pair = testing::make_loopback();
  ASSERT_NE(pair, nullptr);
  // A frame dribbled over about 1.6 s in 50 ms steps still arrives under a 2 s idle bound.
  pair->server->set_read_timeout(milliseconds(2000));
  const std::vector<std::byte> payload = encode_payload(Message{Error{ErrorCode::kInternal, "abcd"}});
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kError);
  header.payload_length = payload.size();
  std::vector<std::byte> bytes;
  const auto header_bytes = encode_header(header);
  bytes.insert(bytes.end(), header_bytes.begin(), header_bytes.end());
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  testing::PeerThread writer(*pair->client, [&] {
    for (std::size_t sent = 0; sent < bytes.size(); sent += 4) {
      const std::array<asio::const_buffer, 1> part{asio::buffer(bytes.data() + sent, std::min<std::size_t>(4, bytes.size() - sent))};
      if (!pair->client->write_buffers(part).is_ok()) return;
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  Result<IncomingFrame> frame = pair->server->read_frame();
  ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
  EXPECT_EQ(std::get<Error>(frame->message), (Error{ErrorCode::kInternal, "abcd"}));
  writer.join();
}

TEST(ReadDeadline, DeadlineBoundsATricklingPeer) {
  auto pair = testing::make_loopback();
  ASSERT_NE(pair, nullptr);
  // A byte every 100 ms never trips an idle bound, but the whole read must end by the deadline.
  pair->server->set_read_deadline(milliseconds(500));
  std::atomic<bool> stop{false};
  testing::PeerThread trickler(*pair->client, [&] {
    const std::array<std::byte, 1> byte{std::byte{'T'}};
    while (!stop) {
      const std::array<asio::const_buffer, 1> part{asio::buffer(byte)};
      if (!pair->client->write_buffers(part).is_ok()) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  const auto start = Clock::now();
  Result<FrameHeader> header = pair->server->read_header();
  stop = true;
  ASSERT_FALSE(header.is_ok());
  EXPECT_EQ(header.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(header.status().message().find("within 0.5 s"), std::string::npos) << header.status().message();
  EXPECT_LT(seconds_since(start), 10.0);
  trickler.join();
  // Lifted, the connection reads without a bound again (nothing left to test but that it is).
  pair->server->clear_read_deadline();
  EXPECT_EQ(pair->server->read_timeout(), milliseconds(0));
}

TEST(ReadDeadline, ClientHandshakeGivesUpOnASilentWorker) {
  auto pair = testing::make_loopback();
  ASSERT_NE(pair, nullptr);
  // The "worker" accepted the connection (as a stopped process's kernel does) but never says HELLO.
  const auto start = Clock::now();
  Result<Hello> hello = client_handshake(*pair->client, "secret", milliseconds(400));
  ASSERT_FALSE(hello.is_ok());
  EXPECT_EQ(hello.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(hello.status().message().find("handshake with worker " + pair->client->peer()), std::string::npos)
      << hello.status().message();
  EXPECT_NE(hello.status().message().find("within 0.4 s"), std::string::npos) << hello.status().message();
  EXPECT_LT(seconds_since(start), 10.0);
}

TEST(ReadDeadline, WaitReadableAndPeerClosed) {
  auto pair = testing::make_loopback();
  ASSERT_NE(pair, nullptr);
  EXPECT_FALSE(pair->server->wait_readable(milliseconds(50)));
  EXPECT_FALSE(pair->server->peer_closed());
  ASSERT_TRUE(pair->client->write_message(Bye{}).is_ok());
  EXPECT_TRUE(pair->server->wait_readable(milliseconds(5000)));
  EXPECT_FALSE(pair->server->peer_closed());  // data waiting is not a hang-up
  pair->client.reset();                       // closes the socket
  const auto start = Clock::now();
  while (!pair->server->peer_closed() && seconds_since(start) < 10.0) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(pair->server->peer_closed());
}

}  // namespace
}  // namespace tessera::transport
