// Encrypted links on real loopback TCP: the handshake's negotiation, frames of every size both
// ways at once, what a relay in the middle sees and what happens when it changes a byte, keys
// that differ, and the bounds on every wait.
#include "tessera/transport/tls.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "frame_samples.hpp"
#include "loopback.hpp"
#include "relay.hpp"
#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"

namespace tessera::transport {
namespace {

using namespace std::chrono_literals;
using testing::make_loopback;
using testing::PeerThread;
using testing::Relay;

constexpr std::string_view kSecret = "tls-test-secret";

Hello worker_hello(uint64_t capabilities = kCapabilityGemm | kCapabilityTls) {
  Hello hello;
  hello.worker_version = "0.1.0";
  hello.arch = "x86_64";
  hello.hostname = "desk";
  hello.cores = 2;
  hello.threads = 1;
  hello.capabilities = capabilities;
  hello.challenge = random_challenge();
  return hello;
}

// A bulk frame of `rows` x `cols` doubles whose values say where they are, framed as a STORE but
// written and read raw (transport does not decode a service's payload; the GEMM codec's STORE over
// a connection is tests/gemm/wire_io_test.cpp's). The request id names the tile.
struct StoreSample {
  uint32_t tile_id = 0;
  std::vector<double> data;
  bool operator==(const StoreSample&) const = default;
};
StoreSample store_sample(uint32_t tile_id, uint32_t rows, uint32_t cols) {
  StoreSample sample{tile_id, std::vector<double>(std::size_t{rows} * cols)};
  for (std::size_t i = 0; i < sample.data.size(); ++i) sample.data[i] = static_cast<double>(tile_id * 1000003 + i);
  return sample;
}
Status write_store(FrameConnection& connection, const StoreSample& sample) {
  const std::array<asio::const_buffer, 1> parts = {asio::buffer(sample.data)};
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  header.request_id = sample.tile_id;
  return connection.write_frame(header, parts);
}
// The next frame, which must be such a bulk frame, read whole.
Result<StoreSample> read_bulk(FrameConnection& connection) {
  Result<FrameHeader> header = connection.read_header();
  if (!header) return header.status();
  if (header->type != static_cast<uint16_t>(MessageType::kStore) || header->payload_length % sizeof(double) != 0) {
    return protocol_error("not a bulk frame: " + message_type_name(header->type));
  }
  StoreSample sample{static_cast<uint32_t>(header->request_id),
                     std::vector<double>(header->payload_length / sizeof(double))};
  TESSERA_RETURN_IF_ERROR(connection.read_exact(std::as_writable_bytes(std::span(sample.data))));
  return sample;
}
::testing::AssertionResult read_store(FrameConnection& connection, const StoreSample& expected) {
  Result<StoreSample> store = read_bulk(connection);
  if (!store) return ::testing::AssertionFailure() << store.status().to_string();
  if (store->tile_id != expected.tile_id) return ::testing::AssertionFailure() << "tile " << store->tile_id;
  if (!(*store == expected)) return ::testing::AssertionFailure() << "data of tile " << store->tile_id << " differs";
  return ::testing::AssertionSuccess();
}

// Both handshakes over `pair`, the client asking for `wire`; the worker's side runs on a thread.
struct Handshaken {
  Result<Hello> client = internal_error("not run");
  Status server = internal_error("not run");
};
Handshaken handshake(testing::LoopbackPair& pair, WireMode wire, WireMode server_minimum = WireMode::kPlain,
                     const Hello& hello = worker_hello()) {
  Handshaken result;
  PeerThread worker(*pair.server, [&] {
    pair.server->set_read_deadline(5s);
    result.server = server_handshake(*pair.server, hello, kSecret, server_minimum);
    pair.server->clear_read_deadline();
  });
  result.client = client_handshake(*pair.client, kSecret, 5s, SessionRole::kCoordinator, wire);
  if (!result.client) pair.client->shutdown();  // as the caller's close would: the worker stops waiting
  worker.join();
  return result;
}

TEST(Tls, KeysAreDerivedFromTheSecretAloneAndDifferFromIt) {
  EXPECT_EQ(derive_tls_key("lab secret"), derive_tls_key("lab secret"));
  EXPECT_NE(derive_tls_key("lab secret"), derive_tls_key("lab secret "));
  const TlsKey key = derive_tls_key("0123456789abcdef0123456789abcdef");
  EXPECT_NE(std::string(key.begin(), key.end()), "0123456789abcdef0123456789abcdef");
}

TEST(Tls, WireModesParseAndNameThemselves) {
  EXPECT_EQ(parse_wire_mode("plain").value(), WireMode::kPlain);
  EXPECT_EQ(parse_wire_mode("encrypted").value(), WireMode::kEncrypted);
  Result<WireMode> wrong = parse_wire_mode("tls");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.status().message().find("plain, encrypted"), std::string::npos) << wrong.status().to_string();
  EXPECT_EQ(wire_mode_name(WireMode::kEncrypted), "encrypted");
  EXPECT_EQ(capability_names(kCapabilityGemm | kCapabilityTls), "gemm, tls");
}

TEST(Tls, EncryptedHandshakeThenFramesOfEverySizeBothWaysAtOnce) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Handshaken done = handshake(*pair, WireMode::kEncrypted);
  ASSERT_TRUE(done.client) << done.client.status().to_string();
  ASSERT_TRUE(done.server.is_ok()) << done.server.to_string();
  ASSERT_TRUE(pair->client->encrypted());
  ASSERT_TRUE(pair->server->encrypted());
  EXPECT_NE(pair->client->wire_description().find("TLSv1.3"), std::string::npos) << pair->client->wire_description();

  // Tiles from one double to several records and more than one read chunk, and every message
  // kind, in both directions at the same time, each side with several writer threads: the
  // channel must keep frames whole and records in order while a reader works beside them.
  std::vector<StoreSample> samples;
  for (uint32_t size : {1u, 7u, 45u, 128u, 400u, 1100u}) samples.push_back(store_sample(size, size, size > 300 ? 300 : size));
  const std::vector<Message> messages = testing::sample_messages();
  // Reads are bounded, so data that sits inside OpenSSL while the socket is empty would show up
  // as a timeout here instead of a hang.
  pair->client->set_read_timeout(20s);
  pair->server->set_read_timeout(20s);
  auto send_all = [&](FrameConnection& connection, Status& status) {
    std::vector<std::thread> writers;
    std::array<Status, 3> statuses;
    for (std::size_t w = 0; w < statuses.size(); ++w) {
      writers.emplace_back([&, w] {
        for (std::size_t i = w; i < samples.size(); i += statuses.size()) {
          if (statuses[w].is_ok()) statuses[w] = write_store(connection, samples[i]);
        }
      });
    }
    for (std::thread& writer : writers) writer.join();
    for (const Status& s : statuses) {
      if (!s.is_ok()) status = s;
    }
    for (const Message& message : messages) {
      if (status.is_ok()) status = connection.write_message(message, 9);
    }
  };
  Status server_sent, client_sent;
  std::vector<std::string> server_failures;
  PeerThread server_writer(*pair->server, [&] { send_all(*pair->server, server_sent); });
  PeerThread server_reader(*pair->server, [&] {
    for (std::size_t i = 0; i < samples.size(); ++i) {
      Result<StoreSample> store = read_bulk(*pair->server);
      if (!store) {
        server_failures.push_back(store.status().to_string());
        return;
      }
      auto match = std::find(samples.begin(), samples.end(), *store);
      if (match == samples.end()) server_failures.push_back("a STORE arrived changed");
    }
    for (const Message& message : messages) {
      Result<IncomingFrame> frame = pair->server->read_frame();
      if (!frame || !testing::same_message(frame->message, message)) server_failures.push_back("message out of step");
    }
  });
  send_all(*pair->client, client_sent);
  // The client reads what the server sent: tiles in whatever order the writers won the mutex.
  std::size_t stores_read = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    Result<StoreSample> store = read_bulk(*pair->client);
    ASSERT_TRUE(store) << store.status().to_string();
    auto match =
        std::find_if(samples.begin(), samples.end(), [&](const StoreSample& s) { return s.tile_id == store->tile_id; });
    ASSERT_NE(match, samples.end());
    EXPECT_EQ(store->data, match->data);
    ++stores_read;
  }
  for (const Message& message : messages) {
    Result<IncomingFrame> frame = pair->client->read_frame();
    ASSERT_TRUE(frame) << frame.status().to_string();
    EXPECT_TRUE(testing::same_message(frame->message, message)) << message_type_name(frame->header.type);
  }
  server_writer.join();
  server_reader.join();
  EXPECT_EQ(stores_read, samples.size());
  EXPECT_TRUE(client_sent.is_ok()) << client_sent.to_string();
  EXPECT_TRUE(server_sent.is_ok()) << server_sent.to_string();
  EXPECT_TRUE(server_failures.empty()) << server_failures.front();
  // The counters count frame bytes, the same on both ends.
  EXPECT_EQ(pair->client->bytes_sent(), pair->server->bytes_received());
  EXPECT_EQ(pair->server->bytes_sent(), pair->client->bytes_received());
}

TEST(Tls, PlainHandshakeStaysPlainWithAWorkerThatCouldEncrypt) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Handshaken done = handshake(*pair, WireMode::kPlain);
  ASSERT_TRUE(done.client) << done.client.status().to_string();
  ASSERT_TRUE(done.server.is_ok()) << done.server.to_string();
  EXPECT_FALSE(pair->client->encrypted());
  EXPECT_FALSE(pair->server->encrypted());
  EXPECT_EQ(pair->client->wire_description(), "plain");
}

// A connected pair whose bytes pass through a Relay; the relay goes first when it is destroyed.
struct RelayedPair {
  std::unique_ptr<testing::LoopbackPair> pair;
  std::unique_ptr<Relay> relay;
};
RelayedPair make_relayed_pair() {
  RelayedPair made{std::make_unique<testing::LoopbackPair>(), nullptr};
  asio::ip::tcp::acceptor acceptor(made.pair->server_context,
                                   asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  made.relay = std::make_unique<Relay>(acceptor.local_endpoint().port());
  auto client = FrameConnection::connect("127.0.0.1", made.relay->port(), 5s);
  EXPECT_TRUE(client) << client.status().to_string();
  if (!client) return {};
  made.pair->client = std::move(*client);
  asio::ip::tcp::socket socket(made.pair->server_context);
  acceptor.accept(socket);
  made.pair->server = std::make_unique<FrameConnection>(std::move(socket), Limits{});
  return made;
}

// What a man in the middle sees: the frames' bytes in the clear on a plain link, never on an
// encrypted one.
std::string relayed_client_bytes(WireMode wire, std::string_view marker) {
  RelayedPair relayed = make_relayed_pair();
  if (!relayed.pair) return {};
  testing::LoopbackPair& pair = *relayed.pair;
  Handshaken done = handshake(pair, wire);
  EXPECT_TRUE(done.client) << done.client.status().to_string();
  EXPECT_TRUE(pair.client->write_message(Error{ErrorCode::kInternal, std::string(marker)}).is_ok());
  Result<IncomingFrame> frame = pair.server->read_frame();
  EXPECT_TRUE(frame) << frame.status().to_string();
  return relayed.relay->client_bytes();
}

TEST(Tls, ARelayInTheMiddleReadsPlainFramesButNotEncryptedOnes) {
  const std::string marker = "matrix-row-41-of-the-quarterly-figures";
  EXPECT_NE(relayed_client_bytes(WireMode::kPlain, marker).find(marker), std::string::npos);
  const std::string encrypted = relayed_client_bytes(WireMode::kEncrypted, marker);
  EXPECT_GT(encrypted.size(), marker.size());
  EXPECT_EQ(encrypted.find(marker), std::string::npos);
}

TEST(Tls, AByteChangedOnTheWayFailsTheReadAndNothingChangedIsDelivered) {
  RelayedPair relayed = make_relayed_pair();
  ASSERT_TRUE(relayed.pair);
  testing::LoopbackPair* pair = relayed.pair.get();
  Relay& relay = *relayed.relay;
  Handshaken done = handshake(*pair, WireMode::kEncrypted);
  ASSERT_TRUE(done.client) << done.client.status().to_string();
  ASSERT_TRUE(done.server.is_ok()) << done.server.to_string();

  // One good frame, then a tile with one byte inverted deep inside its second record.
  const StoreSample good = store_sample(3, 20, 20);
  ASSERT_TRUE(write_store(*pair->client, good).is_ok());
  ASSERT_TRUE(read_store(*pair->server, good));
  relay.corrupt_after(20000);
  const StoreSample tampered = store_sample(4, 100, 100);
  Status sent;
  PeerThread writer(*pair->client, [&] { sent = write_store(*pair->client, tampered); });
  pair->server->set_read_timeout(10s);
  Result<StoreSample> frame = read_bulk(*pair->server);
  writer.join();
  ASSERT_FALSE(frame) << "a changed record was delivered";
  EXPECT_EQ(frame.status().code(), StatusCode::kProtocolError) << frame.status().to_string();
  EXPECT_NE(frame.status().message().find("integrity"), std::string::npos) << frame.status().to_string();
  EXPECT_NE(frame.status().message().find("127.0.0.1"), std::string::npos) << frame.status().to_string();
}

TEST(Tls, KeysThatDifferAreRefusedOnBothSides) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->server->set_read_deadline(5s);
  pair->client->set_read_deadline(5s);
  Status server_status;
  PeerThread server(*pair->server, [&] {
    server_status = pair->server->start_tls(FrameConnection::TlsSide::kServer, "the worker's secret");
  });
  const Status client_status = pair->client->start_tls(FrameConnection::TlsSide::kClient, "another secret");
  server.join();
  EXPECT_EQ(server_status.code(), StatusCode::kAuthFailed) << server_status.to_string();
  EXPECT_EQ(client_status.code(), StatusCode::kAuthFailed) << client_status.to_string();
  EXPECT_NE(server_status.message().find("same secret"), std::string::npos) << server_status.to_string();
  EXPECT_NE(client_status.message().find("same secret"), std::string::npos) << client_status.to_string();
  EXPECT_FALSE(pair->client->encrypted());
}

TEST(Tls, AWorkerThatTakesEncryptedLinksOnlyRefusesAPlainClientNamingTheSetting) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Handshaken done = handshake(*pair, WireMode::kPlain, WireMode::kEncrypted);
  ASSERT_FALSE(done.client);
  EXPECT_EQ(done.client.status().code(), StatusCode::kInvalidConfig) << done.client.status().to_string();
  EXPECT_NE(done.client.status().message().find("wire: encrypted"), std::string::npos) << done.client.status().to_string();
  EXPECT_EQ(done.server.code(), StatusCode::kProtocolError) << done.server.to_string();
}

TEST(Tls, AClientThatWantsEncryptionRefusesAWorkerThatCannot) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Handshaken done = handshake(*pair, WireMode::kEncrypted, WireMode::kPlain, worker_hello(kCapabilityGemm));
  ASSERT_FALSE(done.client);
  EXPECT_EQ(done.client.status().code(), StatusCode::kProtocolError) << done.client.status().to_string();
  EXPECT_NE(done.client.status().message().find("cannot encrypt"), std::string::npos) << done.client.status().to_string();
  EXPECT_FALSE(done.server.is_ok());  // the client hung up before AUTH
}

TEST(Tls, AClientThatWantsEncryptionRefusesAWorkerThatDoesNotAgree) {
  // A worker (or a man in the middle) that answers AUTH_OK without the flag: nothing may follow
  // in the clear.
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const Hello hello = worker_hello();
  PeerThread worker(*pair->server, [&] {
    if (!pair->server->write_message(hello).is_ok()) return;
    Result<IncomingFrame> auth = pair->server->read_frame();
    if (!auth || !std::holds_alternative<Auth>(auth->message)) return;
    AuthOk ok;
    ok.mac = worker_mac(kSecret, std::get<Auth>(auth->message).challenge, hello.challenge);
    (void)pair->server->write_message(ok);  // no kFrameFlagStartTls
  });
  Result<Hello> seen = client_handshake(*pair->client, kSecret, 5s, SessionRole::kCoordinator, WireMode::kEncrypted);
  worker.join();
  ASSERT_FALSE(seen);
  EXPECT_EQ(seen.status().code(), StatusCode::kProtocolError) << seen.status().to_string();
  EXPECT_NE(seen.status().message().find("did not agree to encrypt"), std::string::npos) << seen.status().to_string();
}

TEST(Tls, ATlsHandshakeNobodyAnswersEndsAtTheDeadline) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  pair->client->set_read_deadline(300ms);  // the server side never starts TLS
  const Status status = pair->client->start_tls(FrameConnection::TlsSide::kClient, kSecret);
  EXPECT_EQ(status.code(), StatusCode::kNetworkError) << status.to_string();
  EXPECT_NE(status.message().find("did not finish in time"), std::string::npos) << status.to_string();
}

TEST(Tls, AnEncryptedReadWithNothingToReadEndsAtItsTimeoutAndAClosedPeerIsNamed) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Handshaken done = handshake(*pair, WireMode::kEncrypted);
  ASSERT_TRUE(done.client) << done.client.status().to_string();
  pair->server->set_read_timeout(200ms);
  Result<IncomingFrame> quiet = pair->server->read_frame();
  ASSERT_FALSE(quiet);
  EXPECT_EQ(quiet.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(quiet.status().message().find("no frame from"), std::string::npos) << quiet.status().to_string();

  pair->server->set_read_timeout(5s);
  pair->client.reset();  // closes without TLS's close_notify, as a crashed coordinator would
  Result<IncomingFrame> closed = pair->server->read_frame();
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(closed.status().message().find("closed the connection"), std::string::npos) << closed.status().to_string();
}

TEST(Tls, ShutdownFromAnotherThreadEndsABlockedEncryptedRead) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  Handshaken done = handshake(*pair, WireMode::kEncrypted);
  ASSERT_TRUE(done.client) << done.client.status().to_string();
  std::atomic<bool> returned{false};
  std::thread reader([&] {
    (void)pair->server->read_frame();  // no read bounds: only shutdown ends it
    returned = true;
  });
  std::this_thread::sleep_for(50ms);
  pair->server->shutdown();
  reader.join();
  EXPECT_TRUE(returned.load());
}

}  // namespace
}  // namespace tessera::transport
