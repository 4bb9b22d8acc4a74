// The graph probe (graph_probe.hpp says what it measures and why): the probe graph, the sweep,
// the send and receive loops over a local socket pair, and the GRAPH_PROBE handler.
#include "tessera/worker/graph_probe.hpp"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tessera/core/time.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/engine.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/state.hpp"
#include "tessera/graph/wire_codec.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/graphdata/generators.hpp"
#include "tessera/transport/protocol.hpp"
#include "tessera/worker/thread_cpu.hpp"

namespace tessera::worker {

namespace {

namespace tp = tessera::transport;
namespace gr = tessera::graph;
using Clock = std::chrono::steady_clock;

// CPU seconds each send or receive window lasts (and at least this many batches): enough frames
// of either size on a fast core for their fixed costs to average out, while a quarter core still
// spends only 60 ms of wall time on a window.
constexpr double kDeltaWindowCpuSeconds = 0.015;
constexpr int kMinSmallBatches = 32;
constexpr int kMinLargeBatches = 3;
// The sweep also stops after this much wall time per CPU second asked (a node whose share of a
// core is below 1/40 is measured on what it managed).
constexpr double kSweepWallPerCpu = 40.0;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One part owns every vertex: the sweep sends nothing.
class NoPeers final : public gr::Outbound {
 public:
  Status send(gr::DeltaBatch&&) override { return internal_error("the graph probe's part has no peers"); }
};

// A connected pair of local stream sockets; closed on destruction.
class SocketPair {
 public:
  static Result<SocketPair> open() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      return io_error(fmt::format("graph probe: socketpair: {}", std::strerror(errno)));
    }
    return SocketPair(fds[0], fds[1]);
  }
  SocketPair(SocketPair&& other) noexcept : a_(std::exchange(other.a_, -1)), b_(std::exchange(other.b_, -1)) {}
  SocketPair& operator=(SocketPair&&) = delete;
  SocketPair(const SocketPair&) = delete;
  ~SocketPair() {
    if (a_ >= 0) ::close(a_);
    if (b_ >= 0) ::close(b_);
  }
  int a() const { return a_; }
  int b() const { return b_; }

 private:
  SocketPair(int a, int b) : a_(a), b_(b) {}
  int a_ = -1;
  int b_ = -1;
};

// Writes every byte of `buffers` (a gathered write, as FrameConnection::write_frame does); false
// once the other end is shut down.
bool write_all(int fd, std::vector<iovec> buffers) {
  std::size_t first = 0;
  while (first < buffers.size()) {
    msghdr message{};
    message.msg_iov = buffers.data() + first;
    message.msg_iovlen = buffers.size() - first;
    const ssize_t written = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    auto left = static_cast<std::size_t>(written);
    while (first < buffers.size() && left >= buffers[first].iov_len) left -= buffers[first++].iov_len;
    if (first < buffers.size()) {
      buffers[first].iov_base = static_cast<char*>(buffers[first].iov_base) + left;
      buffers[first].iov_len -= left;
    }
  }
  return true;
}

bool read_all(int fd, std::span<std::byte> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t got = ::recv(fd, out.data() + done, out.size() - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<std::size_t>(got);
  }
  return true;
}

// The slots batches use, in an order that spreads them over the whole array (as a run's ghosts
// and received slots are spread over its parts): a random permutation walked cyclically, so a
// batch smaller than the array never repeats a slot.
class SlotStream {
 public:
  SlotStream(uint32_t count, uint64_t seed) : order_(count) {
    std::iota(order_.begin(), order_.end(), 0u);
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (std::size_t i = order_.size(); i > 1; --i) {
      state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
      std::swap(order_[i - 1], order_[(state * 0x2545F4914F6CDD1Dull >> 33) % i]);
    }
  }
  uint32_t next() {
    const uint32_t slot = order_[at_];
    at_ = at_ + 1 == order_.size() ? 0 : at_ + 1;
    return slot;
  }

 private:
  std::vector<uint32_t> order_;
  std::size_t at_ = 0;
};

// CPU seconds and entries of one window of batches of one size.
struct Window {
  double cpu_seconds = 0.0;
  uint64_t batches = 0;
  uint64_t entries = 0;
};

// time = batches x per_batch + entries x per_delta through the two windows' means per batch.
struct Fit {
  double per_delta = 0.0;
  double per_batch = 0.0;
};
Fit fit(const Window& small, const Window& large) {
  const double small_entries = static_cast<double>(small.entries) / static_cast<double>(small.batches);
  const double large_entries = static_cast<double>(large.entries) / static_cast<double>(large.batches);
  const double small_time = small.cpu_seconds / static_cast<double>(small.batches);
  const double large_time = large.cpu_seconds / static_cast<double>(large.batches);
  Fit result;
  if (large_entries > small_entries) result.per_delta = std::max(0.0, (large_time - small_time) / (large_entries - small_entries));
  // Noise can put the line through below 0 at no entries; a batch never costs less than nothing.
  result.per_batch = std::max(0.0, small_time - small_entries * result.per_delta);
  if (result.per_delta == 0.0) result.per_delta = large_time / std::max(large_entries, 1.0);
  return result;
}

// The sending side of a run, batch after batch of `batch` entries: each entry's first
// contribution into its ghost accumulator (acc[o] += c, the slot listed dirty), the flush that
// empties the dirty accumulators into a DeltaBatch, the codec's encoding and the gathered write.
Result<Window> send_window(uint32_t ghosts, uint32_t batch, int min_batches, uint64_t seed) {
  Result<SocketPair> pair = SocketPair::open();
  if (!pair) return pair.status();
  std::jthread drain([fd = pair->b()] {
    std::vector<std::byte> sink(1 << 16);
    while (::recv(fd, sink.data(), sink.size(), 0) > 0) {
    }
  });
  std::vector<double> acc(ghosts, 0.0);
  std::vector<uint32_t> outside_slot(ghosts);
  SlotStream owners(ghosts, seed + 1);
  for (uint32_t& slot : outside_slot) slot = owners.next();
  std::vector<uint32_t> dirty;
  std::vector<uint32_t> flush_slots;
  std::vector<double> flush_deltas;
  SlotStream slots(ghosts, seed);
  Window window;
  const double start = thread_cpu_seconds();
  bool open = true;
  while (open && (window.batches < static_cast<uint64_t>(min_batches) ||
                  thread_cpu_seconds() - start < kDeltaWindowCpuSeconds)) {
    for (uint32_t i = 0; i < batch; ++i) {
      const uint32_t o = slots.next();
      if (acc[o] == 0.0) dirty.push_back(o);
      acc[o] += 1e-7 * static_cast<double>(i + 1);
    }
    flush_slots.clear();
    flush_deltas.clear();
    for (uint32_t o : dirty) {
      if (acc[o] == 0.0) continue;
      flush_slots.push_back(outside_slot[o]);
      flush_deltas.push_back(acc[o]);
      acc[o] = 0.0;
    }
    dirty.clear();
    gr::DeltaBatch deltas;
    deltas.to_part = 1;
    deltas.slots.assign(flush_slots.begin(), flush_slots.end());
    deltas.deltas.assign(flush_deltas.begin(), flush_deltas.end());
    const gr::PayloadParts payload = gr::encode_deltas_parts(1, deltas);
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kGraphDeltas);
    header.payload_length = payload.size();
    std::array<std::byte, tp::kHeaderSize> head = tp::encode_header(header);
    std::vector<iovec> buffers{{head.data(), head.size()}};
    for (std::span<const std::byte> part : payload.parts) {
      buffers.push_back({const_cast<std::byte*>(part.data()), part.size()});
    }
    open = write_all(pair->a(), std::move(buffers));
    ++window.batches;
    window.entries += deltas.slots.size();
  }
  window.cpu_seconds = thread_cpu_seconds() - start;
  ::shutdown(pair->a(), SHUT_RDWR);
  if (!open) return io_error("graph probe: the send probe's socket closed early");
  return window;
}

// The receiving side: a feeder thread writes one encoded GRAPH_DELTAS frame of `batch` entries
// over and over; this thread reads each as the graph service does (header, length checked
// against the codec's bounds, payload read into a buffer, decoded), then does what deliver() and
// the update thread's fold do: slots checked, the batch's residual summed, the entries appended to
// a mailbox, and the mailbox folded into the accumulators.
Result<Window> receive_window(uint32_t vertices, uint32_t batch, int min_batches, uint64_t seed) {
  Result<SocketPair> pair = SocketPair::open();
  if (!pair) return pair.status();
  gr::DeltaBatch deltas;
  SlotStream slots(vertices, seed);
  for (uint32_t i = 0; i < batch; ++i) {
    deltas.slots.push_back(slots.next());
    deltas.deltas.push_back(1e-7 * static_cast<double>(i + 1));
  }
  const std::vector<std::byte> payload = gr::encode_deltas_parts(1, deltas).flatten();
  tp::FrameHeader header;
  header.type = static_cast<uint16_t>(tp::MessageType::kGraphDeltas);
  header.payload_length = payload.size();
  const std::array<std::byte, tp::kHeaderSize> head = tp::encode_header(header);
  std::jthread feeder([fd = pair->b(), &head, &payload] {
    std::vector<iovec> frame{{const_cast<std::byte*>(head.data()), head.size()},
                             {const_cast<std::byte*>(payload.data()), payload.size()}};
    while (write_all(fd, frame)) {
    }
  });
  const tp::Limits limits;
  std::vector<double> acc(vertices, 0.0);
  std::vector<uint32_t> mailbox_slots;
  std::vector<double> mailbox_deltas;
  std::array<std::byte, tp::kHeaderSize> header_bytes;
  std::vector<std::byte> buffer;
  Window window;
  double residual = 0.0;
  Status failure;
  const double start = thread_cpu_seconds();
  while (window.batches < static_cast<uint64_t>(min_batches) || thread_cpu_seconds() - start < kDeltaWindowCpuSeconds) {
    if (!read_all(pair->a(), header_bytes)) {
      failure = io_error("graph probe: the receive probe's socket closed early");
      break;
    }
    Result<tp::FrameHeader> read_header = tp::decode_header(header_bytes, limits);
    if (!read_header) {
      failure = read_header.status();
      break;
    }
    if (Status length = gr::check_graph_payload_length(read_header->type, read_header->payload_length, limits);
        !length.is_ok()) {
      failure = length;
      break;
    }
    buffer.resize(static_cast<std::size_t>(read_header->payload_length));
    if (!read_all(pair->a(), buffer)) {
      failure = io_error("graph probe: the receive probe's socket closed early");
      break;
    }
    Result<gr::GraphMessage> message = gr::decode_graph_payload(read_header->type, buffer, limits);
    if (!message) {
      failure = message.status();
      break;
    }
    gr::DeltaBatch& received = std::get<gr::GraphDeltas>(*message).batch;
    for (std::size_t i = 0; i < received.slots.size(); ++i) {
      if (received.slots[i] >= vertices || !std::isfinite(received.deltas[i])) {
        failure = internal_error("graph probe: a probe batch failed its own check");
        break;
      }
    }
    if (!failure.is_ok()) break;
    for (double delta : received.deltas) residual += std::abs(delta);
    mailbox_slots.insert(mailbox_slots.end(), received.slots.begin(), received.slots.end());
    mailbox_deltas.insert(mailbox_deltas.end(), received.deltas.begin(), received.deltas.end());
    for (std::size_t i = 0; i < mailbox_slots.size(); ++i) acc[mailbox_slots[i]] += mailbox_deltas[i];
    mailbox_slots.clear();
    mailbox_deltas.clear();
    ++window.batches;
    window.entries += received.slots.size();
  }
  window.cpu_seconds = thread_cpu_seconds() - start;
  ::shutdown(pair->a(), SHUT_RDWR);
  feeder.join();
  if (!failure.is_ok()) return failure;
  if (!(residual > 0.0)) return internal_error("graph probe: the received deltas summed to nothing");
  return window;
}

}  // namespace

uint64_t graph_probe_bytes(const gr::GraphProbe& probe) {
  const uint64_t vertices = uint64_t{1} << std::min(probe.scale, 40u);
  const uint64_t edges = vertices * probe.edge_factor;
  // The generated edge list (24 bytes an edge) with the graph built from it (offsets, targets), then
  // the part (a copy), its state and the engine's accumulators; the delta windows' arrays and frames.
  return edges * (2 * sizeof(graphdata::DirectedEdge) + 3 * sizeof(uint32_t)) + vertices * 96 +
         uint64_t{probe.large_batch} * 64 + (4u << 20);
}

Result<gr::GraphProbeResult> measure_graph_rates(const gr::GraphProbe& probe, const std::function<bool()>& stopping) {
  TESSERA_RETURN_IF_ERROR(gr::check_graph_probe(probe));
  const auto stop_asked = [&] { return stopping && stopping(); };
  const Clock::time_point wall_start = Clock::now();
  const double cpu_start = process_cpu_seconds();

  // The probe graph, one part holding all of it.
  const gr::AlgorithmSpec spec{.kind = gr::AlgorithmKind::kPageRank};
  gr::GraphPart part;
  uint64_t edges = 0;
  {
    Result<graphdata::DirectedGraph> graph =
        graphdata::generate_directed_graph(fmt::format("rmat:{}:{}", probe.scale, probe.edge_factor), probe.seed);
    if (!graph) return graph.status().with_context("graph probe: ");
    const gr::VertexState state = gr::initial_state(*graph, spec);
    const gr::Placement placement =
        gr::make_placement(std::vector<int32_t>(static_cast<std::size_t>(graph->vertex_count), 0), 1);
    part = std::move(gr::build_parts(*graph, placement, state.value, state.delta)[0]);
    edges = part.edge_count();
  }
  const uint32_t vertices = part.local_count;
  if (vertices == 0 || edges == 0) return internal_error("graph probe: the probe graph came out empty");
  if (stop_asked()) return cancelled("graph probe: the worker is stopping");

  // The sweep: edge updates per CPU second of the one update thread (the session thread sleeps).
  NoPeers no_peers;
  gr::EngineOptions options;
  options.threads = 1;
  Result<std::unique_ptr<gr::Engine>> engine = gr::Engine::create(std::move(part), spec, options, no_peers);
  if (!engine) return engine.status().with_context("graph probe: ");
  const double sweep_cpu_start = process_cpu_seconds();
  const Clock::time_point sweep_start = Clock::now();
  (*engine)->start();
  while (process_cpu_seconds() - sweep_cpu_start < probe.sweep_cpu_seconds &&
         seconds_since(sweep_start) < kSweepWallPerCpu * probe.sweep_cpu_seconds && !stop_asked()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  (*engine)->stop();
  const double sweep_cpu = process_cpu_seconds() - sweep_cpu_start;
  const gr::EngineProgress swept = (*engine)->progress();
  engine->reset();
  if (stop_asked()) return cancelled("graph probe: the worker is stopping");
  if (swept.edge_updates == 0 || !(sweep_cpu > 0.0)) {
    return internal_error(fmt::format("graph probe: the sweep made {} edge updates in {:.3f} CPU s",
                                      swept.edge_updates, sweep_cpu));
  }
  const double edge_updates_per_cpu_s = static_cast<double>(swept.edge_updates) / sweep_cpu;

  // Sending and receiving at both batch sizes.
  Result<Window> send_small = send_window(vertices, probe.small_batch, kMinSmallBatches, probe.seed);
  if (!send_small) return send_small.status();
  Result<Window> send_large = send_window(vertices, probe.large_batch, kMinLargeBatches, probe.seed + 2);
  if (!send_large) return send_large.status();
  if (stop_asked()) return cancelled("graph probe: the worker is stopping");
  Result<Window> receive_small = receive_window(vertices, probe.small_batch, kMinSmallBatches, probe.seed + 4);
  if (!receive_small) return receive_small.status();
  Result<Window> receive_large = receive_window(vertices, probe.large_batch, kMinLargeBatches, probe.seed + 6);
  if (!receive_large) return receive_large.status();

  gr::GraphProbeResult result;
  result.seconds = seconds_since(wall_start);
  result.cpu_share = std::clamp((process_cpu_seconds() - cpu_start) / std::max(result.seconds, 1e-9), 1e-3, 1.0);
  const Fit send = fit(*send_small, *send_large);
  const Fit receive = fit(*receive_small, *receive_large);
  result.edge_updates_per_s = edge_updates_per_cpu_s * result.cpu_share;
  result.send_s_per_delta = send.per_delta / result.cpu_share;
  result.send_s_per_batch = send.per_batch / result.cpu_share;
  result.receive_s_per_delta = receive.per_delta / result.cpu_share;
  result.receive_s_per_batch = receive.per_batch / result.cpu_share;
  result.edges = edges;
  return result;
}

namespace {

HandlerStep handle_graph_probe(ServiceContext& context, const tp::FrameHeader& header) {
  Result<gr::GraphMessage> message = gr::read_graph_payload(context.connection(), header);
  if (!message) return context.read_failed(message.status(), header.request_id);
  const gr::GraphProbe probe = std::get<gr::GraphProbe>(*message);
  // Charged before anything is generated: the request names a size, the cap decides.
  const uint64_t bytes = graph_probe_bytes(probe);
  Result<MemoryCharge> charge = context.store().charge(
      bytes, fmt::format("GRAPH_PROBE of rmat:{}:{} ({} bytes)", probe.scale, probe.edge_factor, bytes));
  if (!charge) return context.fail(tp::ErrorCode::kOutOfMemory, charge.status().message(), header.request_id);
  Result<gr::GraphProbeResult> result = measure_graph_rates(probe, [&context] { return context.stopping(); });
  charge->reset();
  if (!result) {
    if (result.status().code() == StatusCode::kCancelled) return context.end(result.status().message());
    return context.fail(tp::ErrorCode::kInternal, result.status().message(), header.request_id);
  }
  context.log(fmt::format("graph probe rmat:{}:{}: {:.1f} M edge updates/s, send {:.1f} ns/delta + {:.1f} us/batch, "
                          "receive {:.1f} ns/delta + {:.1f} us/batch (core share {:.2f}, {:.2f} s)",
                          probe.scale, probe.edge_factor, result->edge_updates_per_s / 1e6,
                          result->send_s_per_delta * 1e9, result->send_s_per_batch * 1e6,
                          result->receive_s_per_delta * 1e9, result->receive_s_per_batch * 1e6, result->cpu_share,
                          result->seconds));
  const gr::GraphMessage reply{*result};
  const Status sent = gr::write_graph_frame(context.connection(), tp::MessageType::kGraphProbeResult,
                                            gr::encode_graph_parts(reply), header.request_id);
  if (!sent.is_ok()) return context.read_failed(sent, header.request_id);
  return HandlerStep::kContinue;
}

}  // namespace

Service graph_probe_service() {
  Service service;
  service.name = "graph-probe";
  service.capability = tp::kCapabilityGraphProbe;
  MessageHandler handler;
  handler.type = tp::MessageType::kGraphProbe;
  handler.on_stream = handle_graph_probe;
  service.handlers.push_back(std::move(handler));
  return service;
}

}  // namespace tessera::worker
