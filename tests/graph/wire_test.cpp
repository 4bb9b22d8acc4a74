#include "tessera/graph/wire.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../transport/alloc_counter.hpp"
#include "../transport/loopback.hpp"
#include "tessera/graph/wire_codec.hpp"

namespace tessera::graph {
namespace {

namespace tp = tessera::transport;
using tp::MessageType;
using tp::testing::AllocationCounter;

// A decoder that refused a lying count allocated about nothing: far below what was claimed.
constexpr uint64_t kSmallAllocation = 64 * 1024;

// Part 1 of 3: three owned vertices, five weighted edges, two ghosts. The codec checks structure
// only, so the contents need not form a valid graph; they only need distinct, exact values.
GraphPart sample_part(bool weighted) {
  GraphPart part;
  part.part_index = 1;
  part.part_count = 3;
  part.local_count = 3;
  part.offsets = {0, 2, 2, 5};
  part.targets = {1, 3, 0, 4, 2};
  if (weighted) part.weights = {0.5, 1.25, 2.0, 0.0, 3.5};
  part.ghosts = {{0, 7}, {2, 1}};
  part.value = {0.0, 1.0 / 3.0, -2.5};
  part.delta = {0.05, std::numeric_limits<double>::infinity(), 1e-300};
  return part;
}

RunSetup sample_setup() {
  RunSetup setup;
  setup.run_id = 0x0123456789abcdefull;
  setup.algorithm.kind = AlgorithmKind::kShortestPaths;
  setup.algorithm.source = 42;
  setup.algorithm.max_label = false;
  setup.engine.threads = 3;
  setup.engine.idle_residual = 1e-9;
  setup.engine.priority_fraction = 0.5;
  setup.engine.batch_max_entries = 512;
  setup.engine.batch_max_age = std::chrono::microseconds(750);
  setup.peers = {{"10.0.0.1", 7070}, {"pi-2.local", 7071}, {"fd00::3", 65535}};
  return setup;
}

EngineProgress sample_progress() {
  EngineProgress p;
  p.value_sum = 0.999;
  p.residual = 3e-7;
  p.updates = 10;
  p.edge_updates = 170;
  p.batches_sent = 4;
  p.batches_received = 5;
  p.deltas_sent = 40;
  p.deltas_received = 50;
  p.busy_seconds = 0.25;
  p.idle_seconds = 1.5;
  p.running = true;
  return p;
}

std::vector<GraphMessage> sample_messages() {
  RunSetup pagerank = sample_setup();
  pagerank.algorithm = AlgorithmSpec{};  // no source, max_label true
  StepReport report;
  report.step = 9;
  report.batches_sent_to = {2, 0, 1};
  report.progress = sample_progress();
  NodeProgress node;
  node.engine = sample_progress();
  node.peer_bytes_sent = 1 << 20;
  node.peer_bytes_received = 3;
  node.memory_bytes = 123456;
  DeltaBatch batch;
  batch.step = 4;
  batch.from_part = 2;
  batch.to_part = 0;
  batch.slots = {0, 5, 3};
  batch.deltas = {0.125, -1.0, 7.0};
  batch.sender_scale = 0.375f;
  return {GraphLoad{sample_setup(), sample_part(true)},
          GraphLoad{pagerank, sample_part(false)},
          GraphReady{77, 4096},
          GraphStart{},
          GraphStep{3, 12},
          GraphStepDone{report},
          GraphStepDone{StepReport{}},
          GraphProgressRequest{},
          GraphProgressRequest{PriorityLevel{2.5e-9, 12.5, 1.5e-6}},
          GraphProgress{node},
          GraphValuesRequest{},
          GraphValues{true, {1.0, 0.5, std::numeric_limits<double>::infinity()}},
          GraphValues{false, {}},
          GraphStop{},
          GraphPeerHello{77, 2},
          GraphDeltas{77, batch},
          GraphDeltas{78, DeltaBatch{}},
          GraphProbe{},
          GraphProbe{10, 4, 1, 2, 2.0, 99},
          GraphProbeResult{4.5e7, 2e-8, 3e-6, 1.5e-8, 2e-6, 0.25, 2097152, 1.25}};
}

uint16_t type_of(const GraphMessage& message) { return static_cast<uint16_t>(graph_message_type(message)); }

template <typename T>
void put_le(std::vector<std::byte>& bytes, std::size_t offset, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    bytes[offset + i] = static_cast<std::byte>(static_cast<uint64_t>(value) >> (8 * i));
  }
}

::testing::AssertionResult refused(uint16_t type, const std::vector<std::byte>& payload, const std::string& text) {
  Result<GraphMessage> decoded = decode_graph_payload(type, payload, tp::Limits{});
  if (decoded) return ::testing::AssertionFailure() << tp::message_type_name(type) << " was accepted";
  const Status& status = decoded.status();
  if (status.code() != StatusCode::kProtocolError || status.message().find(text) == std::string::npos) {
    return ::testing::AssertionFailure() << status.to_string() << " (wanted kProtocolError with \"" << text << "\")";
  }
  return ::testing::AssertionSuccess();
}

// Offsets in the GRAPH_LOAD layout (wire_codec.hpp).
constexpr std::size_t kPartIndexAt = 72;
constexpr std::size_t kPartCountAt = 76;
constexpr std::size_t kLocalCountAt = 80;
constexpr std::size_t kGhostCountAt = 84;
constexpr std::size_t kEdgeCountAt = 88;
constexpr std::size_t kWeightedAt = 96;

std::vector<std::byte> load_payload() { return encode_graph_payload(GraphLoad{sample_setup(), sample_part(true)}); }

// --- Codec -------------------------------------------------------------------------------------

TEST(GraphWireCodec, EveryMessageRoundTripsToTheSameBytes) {
  std::vector<bool> seen(std::variant_size_v<GraphMessage>, false);
  for (const GraphMessage& message : sample_messages()) {
    const uint16_t type = type_of(message);
    SCOPED_TRACE(tp::message_type_name(type));
    seen[message.index()] = true;
    EXPECT_EQ(type, tp::kFirstGraphMessageType + message.index());
    const std::vector<std::byte> payload = encode_graph_payload(message);
    EXPECT_TRUE(check_graph_payload_length(type, payload.size(), tp::Limits{}).is_ok());
    // The frame header admits it too (transport bounds GRAPH_* lengths only by the limit).
    tp::FrameHeader header;
    header.type = type;
    header.payload_length = payload.size();
    EXPECT_TRUE(tp::decode_header(tp::encode_header(header), tp::Limits{}));
    Result<GraphMessage> decoded = decode_graph_payload(type, payload, tp::Limits{});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    EXPECT_TRUE(*decoded == message);
    EXPECT_EQ(encode_graph_payload(*decoded), payload);
  }
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i]) << "no sample of alternative " << i;
}

TEST(GraphWireCodec, LayoutsHaveTheDocumentedSizes) {
  EXPECT_EQ(encode_graph_payload(GraphReady{}).size(), kReadyBytes);
  EXPECT_EQ(encode_graph_payload(GraphStep{}).size(), kStepBytes);
  EXPECT_EQ(encode_graph_payload(GraphProgressRequest{}).size(), kProgressRequestBytes);
  EXPECT_EQ(encode_graph_payload(GraphProgress{}).size(), kNodeProgressBytes);
  EXPECT_EQ(encode_graph_payload(GraphPeerHello{}).size(), kPeerHelloBytes);
  EXPECT_EQ(encode_graph_payload(GraphStart{}).size(), 0u);
  EXPECT_EQ(encode_graph_payload(GraphProbe{}).size(), kGraphProbeBytes);
  EXPECT_EQ(encode_graph_payload(GraphProbeResult{}).size(), kGraphProbeResultBytes);
  StepReport report;
  report.batches_sent_to = {1, 2};
  EXPECT_EQ(encode_graph_payload(GraphStepDone{report}).size(), kStepDoneFixedBytes + 16);
  EXPECT_EQ(encode_graph_payload(GraphValues{false, {1.0, 2.0}}).size(), kValuesFixedBytes + 16);
  DeltaBatch batch;
  batch.slots = {1, 2, 3};
  batch.deltas = {1.0, 2.0, 3.0};
  EXPECT_EQ(encode_graph_payload(GraphDeltas{1, batch}).size(), kDeltasFixedBytes + 36);
  // GRAPH_LOAD: the fixed part, the peers (str + port), then the arrays back to back.
  const GraphPart part = sample_part(true);
  const std::size_t peers = (2 + 8 + 2) + (2 + 10 + 2) + (2 + 7 + 2);
  const std::size_t arrays = 8 * 4 + 4 * 5 + 8 * 5 + 8 * 2 + 8 * 3 * 2;
  EXPECT_EQ(load_payload().size(), kLoadFixedBytes + peers + arrays);
  std::vector<std::byte> payload = load_payload();
  uint32_t local_count = 0;
  std::memcpy(&local_count, payload.data() + kLocalCountAt, 4);
  EXPECT_EQ(local_count, part.local_count);
}

TEST(GraphWireCodec, LoadIsSentFromThePartsOwnMemory) {
  const RunSetup setup = sample_setup();
  const GraphPart part = sample_part(true);
  const PayloadParts parts = encode_load_parts(setup, part);
  ASSERT_EQ(parts.parts.size(), 7u);  // head, offsets, targets, weights, ghosts, value, delta
  EXPECT_EQ(parts.parts[1].data(), reinterpret_cast<const std::byte*>(part.offsets.data()));
  EXPECT_EQ(parts.parts[3].data(), reinterpret_cast<const std::byte*>(part.weights.data()));
  EXPECT_EQ(parts.parts[6].data(), reinterpret_cast<const std::byte*>(part.delta.data()));
  EXPECT_EQ(parts.size(), load_payload().size());
  // Moving keeps the head's span valid.
  PayloadParts moved = encode_load_parts(setup, part);
  const std::byte* head = moved.head.data();
  PayloadParts target = std::move(moved);
  EXPECT_EQ(target.parts[0].data(), head);
  EXPECT_EQ(target.flatten(), load_payload());
}

TEST(GraphWireCodec, EveryTruncationIsRefusedWithoutLargeAllocations) {
  for (const GraphMessage& message : sample_messages()) {
    const uint16_t type = type_of(message);
    SCOPED_TRACE(tp::message_type_name(type));
    const std::vector<std::byte> payload = encode_graph_payload(message);
    for (std::size_t size = 0; size < payload.size(); ++size) {
      const std::vector<std::byte> cut(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(size));
      AllocationCounter counter;
      Result<GraphMessage> decoded = decode_graph_payload(type, cut, tp::Limits{});
      const uint64_t allocated = counter.bytes();
      ASSERT_FALSE(decoded) << "accepted " << size << " of " << payload.size() << " bytes";
      EXPECT_EQ(decoded.status().code(), StatusCode::kProtocolError);
      EXPECT_LE(allocated, kSmallAllocation) << size << " bytes";
    }
  }
}

TEST(GraphWireCodec, TrailingBytesAreRefused) {
  for (const GraphMessage& message : sample_messages()) {
    const uint16_t type = type_of(message);
    SCOPED_TRACE(tp::message_type_name(type));
    std::vector<std::byte> payload = encode_graph_payload(message);
    payload.push_back(std::byte{0});
    EXPECT_EQ(decode_graph_payload(type, payload, tp::Limits{}).status().code(), StatusCode::kProtocolError);
  }
}

TEST(GraphWireCodec, InflatedCountsAreRefusedBeforeAllocating) {
  struct Case {
    const char* what;
    uint16_t type;
    std::vector<std::byte> payload;
    std::string refusal;
  };
  std::vector<Case> cases;
  const auto load_with = [](std::size_t offset, auto value) {
    std::vector<std::byte> payload = load_payload();
    put_le(payload, offset, value);
    return payload;
  };
  const auto load = static_cast<uint16_t>(MessageType::kGraphLoad);
  cases.push_back({"local_count", load, load_with(kLocalCountAt, uint32_t{0xFFFFFFFF}), "local_count 4294967295"});
  cases.push_back({"edge_count", load, load_with(kEdgeCountAt, uint64_t{1} << 62), "more than 2^64"});
  cases.push_back({"edge_count + 1", load, load_with(kEdgeCountAt, uint64_t{6}), "edge_count 6"});
  cases.push_back({"ghost_count", load, load_with(kGhostCountAt, uint32_t{0x7FFFFFFF}), "ghost_count 2147483647"});
  cases.push_back({"part_count", load, load_with(kPartCountAt, uint32_t{0x7FFFFFFF}), "part_count 2147483647 out of range"});
  cases.push_back({"part_count within bound", load, load_with(kPartCountAt, kMaxGraphParts), "peers need at least"});

  std::vector<std::byte> values = encode_graph_payload(GraphValues{true, {1.0, 2.0}});
  put_le(values, 0, uint64_t{1} << 61);
  cases.push_back({"values", static_cast<uint16_t>(MessageType::kGraphValues), values, "count 2305843009213693952"});
  DeltaBatch batch;
  batch.slots = {1};
  batch.deltas = {1.0};
  std::vector<std::byte> deltas = encode_graph_payload(GraphDeltas{1, batch});
  put_le(deltas, 24, uint32_t{0xFFFFFFFF});
  cases.push_back({"deltas", static_cast<uint16_t>(MessageType::kGraphDeltas), deltas, "count 4294967295 deltas"});
  StepReport report;
  report.batches_sent_to = {1};
  std::vector<std::byte> step_done = encode_graph_payload(GraphStepDone{report});
  put_le(step_done, 8 + kProgressBytes, uint32_t{0x80000000});
  cases.push_back({"batches_sent_to", static_cast<uint16_t>(MessageType::kGraphStepDone), step_done,
                   "part_count 2147483648 out of range"});

  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    AllocationCounter counter;
    const bool was_refused = refused(c.type, c.payload, c.refusal);
    const uint64_t allocated = counter.bytes();
    EXPECT_TRUE(was_refused) << refused(c.type, c.payload, c.refusal).message();
    EXPECT_LE(allocated, kSmallAllocation);
  }
}

TEST(GraphWireCodec, FieldsOutsideTheirDomainAreRefused) {
  const auto load = static_cast<uint16_t>(MessageType::kGraphLoad);
  const auto patched = [](std::size_t offset, uint8_t value) {
    std::vector<std::byte> payload = load_payload();
    payload[offset] = static_cast<std::byte>(value);
    return payload;
  };
  EXPECT_TRUE(refused(load, patched(8, 0), "algorithm kind 0 unknown"));
  EXPECT_TRUE(refused(load, patched(8, 5), "algorithm kind 5 unknown"));
  EXPECT_TRUE(refused(load, patched(9, 0x7), "algorithm flags 7 has unknown bits"));
  EXPECT_TRUE(refused(load, patched(9, 0), "source 42 given without the source flag"));
  EXPECT_TRUE(refused(load, patched(10, 1), "algorithm pad byte 0 is 1"));
  EXPECT_TRUE(refused(load, patched(kWeightedAt, 2), "weighted 2 is neither 0 nor 1"));
  EXPECT_TRUE(refused(load, patched(kWeightedAt + 3, 9), "part pad byte 2 is 9"));
  EXPECT_TRUE(refused(load, patched(kPartIndexAt, 3), "part_index 3 is not below part_count 3"));
  EXPECT_TRUE(refused(load, patched(kPartCountAt, 0), "part_count 0 out of range"));
  // A part without edges is sent unweighted; the weighted flag on it would be a second spelling
  // (found by fuzz_codec: the payload did not re-encode to its own bytes).
  GraphPart edgeless = sample_part(false);
  edgeless.offsets = {0, 0, 0, 0};
  edgeless.targets.clear();
  std::vector<std::byte> edgeless_load = encode_graph_payload(GraphLoad{sample_setup(), edgeless});
  ASSERT_TRUE(decode_graph_payload(load, edgeless_load, tp::Limits{}));
  edgeless_load[kWeightedAt] = std::byte{1};
  EXPECT_TRUE(refused(load, edgeless_load, "weighted is 1 but edge_count is 0"));

  std::vector<std::byte> progress = encode_graph_payload(GraphProgress{});
  progress[80] = std::byte{2};
  EXPECT_TRUE(refused(static_cast<uint16_t>(MessageType::kGraphProgress), progress, "running 2 is neither 0 nor 1"));
  std::vector<std::byte> hello = encode_graph_payload(GraphPeerHello{1, 2});
  hello[15] = std::byte{1};
  EXPECT_TRUE(refused(static_cast<uint16_t>(MessageType::kGraphPeerHello), hello, "pad byte 3 is 1"));
  EXPECT_TRUE(refused(static_cast<uint16_t>(MessageType::kGraphStop), {std::byte{0}}, "trailing bytes"));
  for (double bad : {-1e-9, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    for (PriorityLevel level : {PriorityLevel{bad, 0.0, 0.0}, PriorityLevel{0.0, bad, 0.0}, PriorityLevel{0.0, 0.0, bad}}) {
      EXPECT_TRUE(refused(static_cast<uint16_t>(MessageType::kGraphProgressRequest),
                          encode_graph_payload(GraphProgressRequest{level}), "must be finite and >= 0"))
          << bad;
    }
  }
}

TEST(GraphWireCodec, ProbeSizesOutOfRangeAreRefused) {
  const auto probe = static_cast<uint16_t>(MessageType::kGraphProbe);
  const auto with = [](auto change) {
    GraphProbe request;
    change(request);
    return request;
  };
  struct Case {
    GraphProbe request;
    std::string refusal;
  };
  const std::vector<Case> cases = {
      {with([](GraphProbe& p) { p.scale = 7; }), "scale 7 out of range 8..22"},
      {with([](GraphProbe& p) { p.scale = 0xFFFFFFFFu; }), "scale 4294967295 out of range"},
      {with([](GraphProbe& p) { p.edge_factor = 0; }), "edge_factor 0 out of range"},
      {with([](GraphProbe& p) { p.edge_factor = 1u << 31; }), "edge_factor 2147483648 out of range"},
      {with([](GraphProbe& p) { p.scale = 22; }), "rmat:22:16 has over 8388608 edges"},
      {with([](GraphProbe& p) { p.small_batch = 0; }), "batch sizes 0 and 65536"},
      {with([](GraphProbe& p) { p.small_batch = p.large_batch; }), "must satisfy 1 <= small < large"},
      {with([](GraphProbe& p) { p.large_batch = 0xFFFFFFFFu; }), "<= 262144"},
      {with([](GraphProbe& p) { p.sweep_cpu_seconds = 0.0; }), "sweep_cpu_seconds"},
      {with([](GraphProbe& p) { p.sweep_cpu_seconds = 1e9; }), "sweep_cpu_seconds"},
      {with([](GraphProbe& p) { p.sweep_cpu_seconds = std::numeric_limits<double>::quiet_NaN(); }), "sweep_cpu_seconds"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.refusal);
    AllocationCounter counter;
    // The encoder writes whatever it is given; the decoder is what stands between a claim and
    // the worker's memory.
    const std::vector<std::byte> payload = encode_graph_payload(c.request);
    EXPECT_TRUE(refused(probe, payload, c.refusal));
    EXPECT_LE(counter.bytes(), kSmallAllocation);
    EXPECT_EQ(check_graph_probe(c.request).code(), StatusCode::kProtocolError);
  }
  EXPECT_TRUE(check_graph_probe(GraphProbe{}).is_ok());
  EXPECT_TRUE(check_graph_probe(with([](GraphProbe& p) { p.scale = 19; })).is_ok()) << "2^19 x 16: the largest";
  // The fixed layouts take exactly their size.
  EXPECT_FALSE(check_graph_payload_length(probe, kGraphProbeBytes + 8, tp::Limits{}).is_ok());
  EXPECT_FALSE(check_graph_payload_length(static_cast<uint16_t>(MessageType::kGraphProbeResult), 8, tp::Limits{}).is_ok());
}

TEST(GraphWireCodec, OnlyGraphTypesAreDecoded) {
  for (uint16_t type : {uint16_t{0}, static_cast<uint16_t>(MessageType::kStore), uint16_t{tp::kLastMessageType + 1}}) {
    EXPECT_TRUE(refused(type, {}, "is not a graph message")) << type;
  }
  tp::Limits small;
  small.max_payload_bytes = 8;
  EXPECT_EQ(decode_graph_payload(static_cast<uint16_t>(MessageType::kGraphStep), encode_graph_payload(GraphStep{}), small)
                .status()
                .code(),
            StatusCode::kProtocolError);
}

TEST(GraphWireCodec, PayloadBoundsRefuseImpossibleLengths) {
  const tp::Limits limits;
  const auto ok = [&](MessageType type, uint64_t length) {
    return check_graph_payload_length(static_cast<uint16_t>(type), length, limits).is_ok();
  };
  EXPECT_TRUE(ok(MessageType::kGraphStart, 0));
  EXPECT_FALSE(ok(MessageType::kGraphStart, 1));
  EXPECT_TRUE(ok(MessageType::kGraphStep, kStepBytes));
  EXPECT_FALSE(ok(MessageType::kGraphStep, kStepBytes + 1));
  EXPECT_FALSE(ok(MessageType::kGraphProgress, kNodeProgressBytes - 1));
  EXPECT_TRUE(ok(MessageType::kGraphLoad, limits.max_payload_bytes));
  EXPECT_FALSE(ok(MessageType::kGraphLoad, limits.max_payload_bytes + 1));
  EXPECT_FALSE(ok(MessageType::kGraphLoad, kLoadFixedBytes));
  EXPECT_FALSE(ok(MessageType::kGraphStepDone, kStepDoneFixedBytes + 8 * (uint64_t{kMaxGraphParts} + 1)));
  const Status refusal = check_graph_payload_length(static_cast<uint16_t>(MessageType::kGraphReady), 3, limits);
  EXPECT_NE(refusal.message().find("GRAPH_READY: payload_length 3 out of range 16..16"), std::string::npos)
      << refusal.to_string();
}

TEST(GraphWireCodec, TheFuzzCorpusSeedsDecodeAsTheirTypes) {
  // tests/fuzz/make_corpus.py writes one frame per GRAPH_* type with its own encoder, from the
  // layouts documented in wire_codec.hpp: the two must agree.
  const std::filesystem::path corpus = std::filesystem::path(TESSERA_TEST_INSTANCES) / ".." / "fuzz" / "corpus" /
                                       "fuzz_codec";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    if (entry.path().filename().string().rfind("graph_", 0) != 0) continue;
    SCOPED_TRACE(entry.path().filename().string());
    std::ifstream file(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    ASSERT_GE(bytes.size(), tp::kHeaderSize);
    std::array<std::byte, tp::kHeaderSize> header_bytes{};
    std::memcpy(header_bytes.data(), bytes.data(), tp::kHeaderSize);
    Result<tp::FrameHeader> header = tp::decode_header(header_bytes, tp::Limits{});
    ASSERT_TRUE(header) << header.status().to_string();
    EXPECT_TRUE(tp::is_graph_message(header->type));
    std::vector<std::byte> payload(bytes.size() - tp::kHeaderSize);
    std::memcpy(payload.data(), bytes.data() + tp::kHeaderSize, payload.size());
    ASSERT_EQ(header->payload_length, payload.size());
    Result<GraphMessage> message = decode_graph_payload(header->type, payload, tp::Limits{});
    ASSERT_TRUE(message) << message.status().to_string();
    EXPECT_EQ(encode_graph_payload(*message), payload);
    if (const auto* load = std::get_if<GraphLoad>(&*message)) {
      EXPECT_TRUE(load->part.validate().is_ok()) << load->part.validate().to_string();
      EXPECT_EQ(load->setup.peers[1], (PeerEndpoint{"pi-2.local", 7071}));
    }
    ++seeds;
  }
  EXPECT_EQ(seeds, static_cast<int>(std::variant_size_v<GraphMessage>));
}

// --- Coordinator calls against a scripted worker ---------------------------------------------

using tp::testing::make_loopback;
using tp::testing::PeerThread;

// The scripted worker's side: the next frame's type and payload, read raw.
struct RawFrame {
  tp::FrameHeader header;
  std::vector<std::byte> payload;
};

std::optional<RawFrame> read_raw(tp::FrameConnection& connection) {
  Result<tp::FrameHeader> header = connection.read_header();
  if (!header) return std::nullopt;
  RawFrame frame{*header, {}};
  if (!connection.read_growing(frame.payload, header->payload_length).is_ok()) return std::nullopt;
  return frame;
}

Status reply(tp::FrameConnection& connection, const GraphMessage& message) {
  const std::vector<std::byte> payload = encode_graph_payload(message);
  tp::FrameHeader header;
  header.type = type_of(message);
  const std::array<asio::const_buffer, 1> parts{asio::buffer(payload)};
  return connection.write_frame(header, parts);
}

TEST(GraphWireCalls, LoadPartSendsTheWholePartAndChecksTheRunOfTheReply) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const RunSetup setup = sample_setup();
  const GraphPart part = sample_part(true);
  std::optional<GraphMessage> received;
  PeerThread worker(*pair->server, [&] {
    for (uint64_t run_id : {setup.run_id, setup.run_id + 1}) {
      std::optional<RawFrame> frame = read_raw(*pair->server);
      if (!frame) return;
      Result<GraphMessage> decoded = decode_graph_payload(frame->header.type, frame->payload, tp::Limits{});
      if (decoded) received = *decoded;
      (void)reply(*pair->server, GraphReady{run_id, 1000});
    }
  });
  ASSERT_TRUE(load_part(*pair->client, setup, part).is_ok());
  const Status wrong_run = load_part(*pair->client, setup, part);
  worker.join();
  ASSERT_TRUE(received.has_value());
  EXPECT_TRUE(*received == GraphMessage(GraphLoad{setup, part}));
  EXPECT_EQ(wrong_run.code(), StatusCode::kProtocolError);
  EXPECT_NE(wrong_run.message().find("with GRAPH_READY for run"), std::string::npos) << wrong_run.to_string();

  RunSetup short_of_peers = setup;
  short_of_peers.peers.pop_back();
  EXPECT_EQ(load_part(*pair->client, short_of_peers, part).code(), StatusCode::kInvalidArgument);
}

TEST(GraphWireCalls, RepliesAreDecodedAndCheckedAgainstTheRequest) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  StepReport report;
  report.step = 5;
  report.batches_sent_to = {0, 3};
  report.progress = sample_progress();
  NodeProgress node;
  node.engine = sample_progress();
  node.memory_bytes = 99;
  std::vector<uint16_t> requests;
  PeerThread worker(*pair->server, [&] {
    const std::vector<GraphMessage> replies = {GraphReady{1, 0},         GraphStepDone{report},
                                               GraphStepDone{report},     GraphProgress{node},
                                               GraphValues{true, {0.25, 0.75}}, GraphReady{1, 0}};
    for (const GraphMessage& message : replies) {
      std::optional<RawFrame> frame = read_raw(*pair->server);
      if (!frame) return;
      requests.push_back(frame->header.type);
      if (!reply(*pair->server, message).is_ok()) return;
    }
  });
  EXPECT_TRUE(start_async(*pair->client).is_ok());
  Result<StepReport> step = run_step(*pair->client, 5, 3);
  ASSERT_TRUE(step) << step.status().to_string();
  EXPECT_EQ(step->batches_sent_to, report.batches_sent_to);
  EXPECT_EQ(step->progress, report.progress);
  EXPECT_EQ(run_step(*pair->client, 6, 0).status().code(), StatusCode::kProtocolError);  // answered for step 5
  Result<NodeProgress> progress = request_progress(*pair->client);
  ASSERT_TRUE(progress) << progress.status().to_string();
  EXPECT_EQ(*progress, node);
  Result<std::vector<double>> values = request_values(*pair->client);
  ASSERT_TRUE(values) << values.status().to_string();
  EXPECT_EQ(*values, (std::vector<double>{0.25, 0.75}));
  EXPECT_TRUE(stop_run(*pair->client).is_ok());
  worker.join();
  const auto t = [](MessageType type) { return static_cast<uint16_t>(type); };
  EXPECT_EQ(requests, (std::vector<uint16_t>{t(MessageType::kGraphStart), t(MessageType::kGraphStep),
                                             t(MessageType::kGraphStep), t(MessageType::kGraphProgressRequest),
                                             t(MessageType::kGraphValuesRequest), t(MessageType::kGraphStop)}));
}

TEST(GraphWireCalls, AWorkersErrorBecomesItsStatusAndAWrongReplyAProtocolError) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  PeerThread worker(*pair->server, [&] {
    if (!read_raw(*pair->server)) return;
    pair->server->write_error(tp::ErrorCode::kOutOfMemory, "GRAPH_LOAD of 9 GB does not fit");
    if (!read_raw(*pair->server)) return;
    (void)reply(*pair->server, GraphReady{});  // where GRAPH_PROGRESS was expected
  });
  const Status refused_load = load_part(*pair->client, sample_setup(), sample_part(false));
  EXPECT_EQ(refused_load.code(), StatusCode::kResourceExhausted) << refused_load.to_string();
  EXPECT_NE(refused_load.message().find("reported out of memory: GRAPH_LOAD of 9 GB does not fit"), std::string::npos)
      << refused_load.to_string();
  Result<NodeProgress> progress = request_progress(*pair->client);
  EXPECT_EQ(progress.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(progress.status().message().find("sent GRAPH_READY where GRAPH_PROGRESS was expected"), std::string::npos)
      << progress.status().to_string();
  worker.join();
}

TEST(GraphWireCalls, ProbeGraphSendsTheRequestAndReturnsTheFigures) {
  auto pair = make_loopback();
  ASSERT_TRUE(pair);
  const GraphProbeResult figures{4.5e7, 2e-8, 3e-6, 1.5e-8, 2e-6, 0.25, 2097152, 1.25};
  std::optional<GraphProbe> asked;
  PeerThread worker(*pair->server, [&] {
    std::optional<RawFrame> frame = read_raw(*pair->server);
    if (!frame) return;
    Result<GraphMessage> request = decode_graph_payload(frame->header.type, frame->payload, tp::Limits{});
    if (request) asked = std::get<GraphProbe>(*request);
    (void)reply(*pair->server, figures);
  });
  GraphProbe probe;
  probe.scale = 12;
  // Out of range: refused here, nothing sent (the worker sees only the request that follows).
  EXPECT_EQ(probe_graph(*pair->client, GraphProbe{.small_batch = 0}).status().code(), StatusCode::kInvalidArgument);
  Result<GraphProbeResult> result = probe_graph(*pair->client, probe);
  ASSERT_TRUE(result) << result.status().to_string();
  EXPECT_EQ(*result, figures);
  worker.join();
  EXPECT_EQ(asked, probe);
}

}  // namespace
}  // namespace tessera::graph
