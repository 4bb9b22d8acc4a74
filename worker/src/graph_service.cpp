#include "tessera/worker/graph_service.hpp"

#include <algorithm>
#include <any>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/core.h>

#include "tessera/graph/engine.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/wire.hpp"
#include "tessera/graph/wire_codec.hpp"
#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/dial.hpp"
#include "worker_log.hpp"
#ifdef TESSERA_FAULT_HOOKS
#include "tessera/worker/fault_hooks.hpp"
#endif

namespace tessera::worker {

namespace {

namespace tp = tessera::transport;
namespace gr = tessera::graph;

// How often a waiting GRAPH_STEP looks whether its coordinator is still there.
constexpr auto kStepWaitSlice = std::chrono::milliseconds(50);

std::string endpoint_text(const gr::PeerEndpoint& peer) {
  return peer.host.find(':') != std::string::npos ? fmt::format("[{}]:{}", peer.host, peer.port)
                                                  : fmt::format("{}:{}", peer.host, peer.port);
}

std::string wait_text(std::chrono::milliseconds span) {
  return fmt::format("{:g} s", static_cast<double>(span.count()) / 1000.0);
}

#ifdef TESSERA_FAULT_HOOKS
// Test twin only (fault_hooks.hpp, delay_deltas_ms): writes each batch `delay` after the engine
// handed it over, in that order, on a thread of its own. The engine, which counted the batch sent
// at the hand-over, goes on meanwhile, so for that long the batch has left the sender's residual
// and is in nobody's received count: exactly what async termination must wait for.
class HeldDeltas {
 public:
  using Write = std::function<Status(tp::FrameConnection&, const gr::GraphMessage&)>;
  HeldDeltas(std::chrono::milliseconds delay, Write write)
      : delay_(delay), write_(std::move(write)), writer_([this] { write_when_due(); }) {}
  ~HeldDeltas() { close(); }
  HeldDeltas(const HeldDeltas&) = delete;
  HeldDeltas& operator=(const HeldDeltas&) = delete;

  // Queues the batch for `link`. Fails with the first failed write, or once closed.
  Status hold(tp::FrameConnection& link, gr::GraphMessage&& message) {
    {
      std::lock_guard lock(mutex_);
      if (!failure_.is_ok()) return failure_;
      if (closed_) return network_error("the peer links are closed");
      held_.push_back({std::chrono::steady_clock::now() + delay_, &link, std::move(message)});
    }
    wake_.notify_one();
    return Status::ok();
  }

  // Drops what is still held and joins the writer. REQUIRES: the links are shut down, so a write
  // blocked on a stalled peer returns.
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      held_.clear();
    }
    wake_.notify_one();
    if (writer_.joinable()) writer_.join();
  }

 private:
  struct Held {
    std::chrono::steady_clock::time_point due;
    tp::FrameConnection* link;
    gr::GraphMessage message;
  };

  void write_when_due() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return closed_ || !held_.empty(); });
      if (closed_ || wake_.wait_until(lock, held_.front().due, [&] { return closed_; })) return;
      Held next = std::move(held_.front());
      held_.pop_front();
      lock.unlock();
      Status written = write_(*next.link, next.message);
      lock.lock();
      if (!written.is_ok() && failure_.is_ok()) failure_ = std::move(written);
    }
  }

  const std::chrono::milliseconds delay_;
  const Write write_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Held> held_;
  bool closed_ = false;
  Status failure_;  // the first failed write
  std::thread writer_;  // last: starts once the rest is built
};
#endif

// The outbound half of a run's peer links: one connection to every part this part sends deltas
// to, made before the engine sends anything and unchanged while it runs, so send() needs no lock
// (FrameConnection writes are thread-safe). close() may come from any thread: it only shuts the
// sockets down, which makes a send blocked on a stalled peer return.
class PeerLinks final : public gr::Outbound {
 public:
  PeerLinks(uint64_t run_id, uint32_t part_count) : run_id_(run_id), links_(part_count) {
#ifdef TESSERA_FAULT_HOOKS
    if (const std::optional<uint32_t> delay = fault_hooks().delay_deltas_ms) {
      held_ = std::make_unique<HeldDeltas>(std::chrono::milliseconds(*delay),
                                           [this](tp::FrameConnection& link, const gr::GraphMessage& message) {
                                             return write(link, message);
                                           });
    }
#endif
  }

  // Connects, authenticates with the peer label and introduces this part to every destination.
  // REQUIRES: the engine is not sending (not started, or between sync steps).
  Status connect(const gr::RunSetup& setup, uint32_t from_part, const std::vector<uint32_t>& destinations,
                 const ServiceContext& context, std::chrono::milliseconds timeout) {
    for (uint32_t to : destinations) {
      if (links_[to] != nullptr) continue;
      const gr::PeerEndpoint& peer = setup.peers[to];
      const std::string who = fmt::format("run {}: part {} cannot open its peer link to part {} at {}", run_id_,
                                          from_part, to, endpoint_text(peer));
      // Peer links are as private as the coordinator's link that set up the run.
      Result<tp::DialedWorker> link = tp::dial_worker(
          tp::Dial{peer.host, peer.port, context.secret(), tp::SessionRole::kPeer, context.wire(), context.limits(), timeout});
      if (!link) return Status(link.status().code(), fmt::format("{}: {}", who, link.status().message()));
      if ((link->hello.capabilities & tp::kCapabilityGraph) == 0) {
        return invalid_config(fmt::format("{}: that worker does not host the graph service (it offers {})", who,
                                          tp::capability_names(link->hello.capabilities)));
      }
      TESSERA_RETURN_IF_ERROR(write(*link->connection, gr::GraphPeerHello{run_id_, from_part}).with_context(who + ": "));
      links_[to] = std::move(link->connection);
    }
    return Status::ok();
  }

  Status send(gr::DeltaBatch&& batch) override {
    tp::FrameConnection* link = batch.to_part < links_.size() ? links_[batch.to_part].get() : nullptr;
    if (link == nullptr) {
      return network_error(fmt::format("run {}: no peer link from part {} to part {}", run_id_, batch.from_part,
                                       batch.to_part));
    }
#ifdef TESSERA_FAULT_HOOKS
    if (held_ != nullptr) return held_->hold(*link, gr::GraphDeltas{run_id_, std::move(batch)});
#endif
    return write(*link, gr::GraphDeltas{run_id_, std::move(batch)});
  }

  // Busy while more than kBusyBytes it wrote to that part are unacknowledged: 64 KiB is 5 ms of
  // a 100 Mbit/s link, so a link is kept full while the engine holds back what would only queue.
  bool ready(uint32_t to_part) override {
    tp::FrameConnection* link = to_part < links_.size() ? links_[to_part].get() : nullptr;
    return link == nullptr || link->unacknowledged_bytes() <= kBusyBytes;
  }

  void close() {
    for (const auto& link : links_) {
      if (link != nullptr) link->shutdown();
    }
#ifdef TESSERA_FAULT_HOOKS
    if (held_ != nullptr) held_->close();
#endif
  }

  uint64_t bytes_sent() const { return bytes_sent_.load(); }

 private:
  Status write(tp::FrameConnection& link, const gr::GraphMessage& message) {
    const gr::PayloadParts payload = gr::encode_graph_parts(message);
    TESSERA_RETURN_IF_ERROR(gr::write_graph_frame(link, gr::graph_message_type(message), payload));
    bytes_sent_.fetch_add(tp::kHeaderSize + payload.size());
    return Status::ok();
  }

  static constexpr uint64_t kBusyBytes = 64 * 1024;
  const uint64_t run_id_;
  std::vector<std::unique_ptr<tp::FrameConnection>> links_;  // by part; null where this part sends nothing
  std::atomic<uint64_t> bytes_sent_{0};
#ifdef TESSERA_FAULT_HOOKS
  std::unique_ptr<HeldDeltas> held_;  // last: its writer stops before the links go
#endif
};

// One loaded run. Shared between the coordinator session, which owns its lifecycle, and the peer
// sessions delivering into it (they hold it only while delivering a batch). Fields marked
// "coordinator" are touched by the coordinator session's thread only.
struct Run {
  Run(gr::RunSetup run_setup, uint32_t part, uint32_t parts)
      : setup(std::move(run_setup)), part_index(part), part_count(parts), links(setup.run_id, parts) {}

  // Counts a delivered batch for GRAPH_STEP's wait. Any thread.
  void note_delivered(uint64_t step, uint32_t from_part) {
    {
      std::lock_guard lock(step_mutex);
      std::vector<uint64_t>& counts = received_per_step[step];
      counts.resize(part_count, 0);
      ++counts[from_part];
    }
    step_arrived.notify_all();
  }

  // Waits until `expected` batches tagged step - 1 have been delivered. Fails with kNetworkError
  // naming what arrived from whom once `wait` has passed, or when the coordinator left.
  Status wait_for_step_input(uint64_t step, uint64_t expected, std::chrono::milliseconds wait,
                             const ServiceContext& context) {
    if (expected == 0) return Status::ok();
    if (step == 0) return invalid_argument(fmt::format("step 0 expects {} batches, but there is no step before it", expected));
    const uint64_t tag = step - 1;
    const auto received = [&] {
      uint64_t total = 0;
      if (auto it = received_per_step.find(tag); it != received_per_step.end()) {
        for (uint64_t count : it->second) total += count;
      }
      return total;
    };
    const auto deadline = std::chrono::steady_clock::now() + wait;
    std::unique_lock lock(step_mutex);
    while (received() < expected) {
      if (std::chrono::steady_clock::now() >= deadline || context.stopping()) {
        std::string from;
        for (uint32_t part = 0; part < part_count; ++part) {
          if (part == part_index) continue;
          const auto it = received_per_step.find(tag);
          from += fmt::format("{}part {}: {}", from.empty() ? "" : ", ", part,
                              it == received_per_step.end() ? 0 : it->second[part]);
        }
        return network_error(fmt::format("run {}, step {}: part {} received {} of the {} batches of step {} within "
                                         "{} (from {}); a peer worker stalled or its link failed",
                                         setup.run_id, step, part_index, received(), expected, tag,
                                         wait_text(wait), from));
      }
      step_arrived.wait_for(lock, kStepWaitSlice);
    }
    return Status::ok();
  }

  // Step `step` folded in every batch tagged before it.
  void forget_steps_before(uint64_t step) {
    std::lock_guard lock(step_mutex);
    received_per_step.erase(received_per_step.begin(), received_per_step.lower_bound(step));
  }

  // False when the run's links are already closed (the run ended meanwhile). Any thread.
  bool add_inbound(tp::FrameConnection* connection) {
    std::lock_guard lock(inbound_mutex);
    if (inbound_closed) return false;
    inbound.push_back(connection);
    return true;
  }
  void remove_inbound(tp::FrameConnection* connection) {
    std::lock_guard lock(inbound_mutex);
    std::erase(inbound, connection);
  }

  // Outbound links first, so an engine thread blocked sending to a stalled peer returns and the
  // engine can stop; then the engine; then the peers' links to us. Coordinator.
  void stop() {
    stopped = true;
    links.close();
    engine->stop();
    std::lock_guard lock(inbound_mutex);
    inbound_closed = true;
    for (tp::FrameConnection* connection : inbound) connection->shutdown();
  }

  const gr::RunSetup setup;
  const uint32_t part_index;
  const uint32_t part_count;
  std::vector<uint32_t> destinations;  // parts this part sends deltas to: its ghosts' owners
  MemoryCharge charge;                 // coordinator
  PeerLinks links;                     // the engine's Outbound: declared before it, outlives it
  std::unique_ptr<gr::Engine> engine;  // set before the run is published
  bool started = false;                // coordinator: the async engine was started
  std::atomic<bool> stopped{false};    // GRAPH_STOP or the run's end; peers are no longer admitted
  std::atomic<uint64_t> peer_bytes_received{0};
  std::atomic<uint64_t> batches_dropped{0};  // of another run id

  std::mutex inbound_mutex;
  bool inbound_closed = false;
  std::vector<tp::FrameConnection*> inbound;  // connections of the run's peer sessions

  std::mutex step_mutex;
  std::condition_variable step_arrived;
  std::map<uint64_t, std::vector<uint64_t>> received_per_step;  // step tag -> batches per sending part
};

// A peer session's tie to its run, kept in its ServiceContext::service_state(); leaving the
// session unregisters its connection from the run.
struct InboundLink {
  InboundLink(std::weak_ptr<Run> link_run, tp::FrameConnection* link_connection, uint32_t from)
      : run(std::move(link_run)), connection(link_connection), from_part(from) {}
  ~InboundLink() {
    if (std::shared_ptr<Run> alive = run.lock()) alive->remove_inbound(connection);
  }
  InboundLink(const InboundLink&) = delete;
  InboundLink& operator=(const InboundLink&) = delete;

  std::weak_ptr<Run> run;
  tp::FrameConnection* connection;
  uint32_t from_part;
};

// The worker's graph state: the current run, shared by the coordinator session and the peer
// sessions. The mutex guards only which run is current; runs lock their own state.
class GraphHost {
 public:
  explicit GraphHost(const GraphServiceOptions& options) : options_(options) {}

  // --- Coordinator session ---
  HandlerStep load(ServiceContext& context, const tp::FrameHeader& header);
  HandlerStep start(ServiceContext& context, const tp::FrameHeader& header);
  HandlerStep step(ServiceContext& context, const tp::FrameHeader& header);
  HandlerStep progress(ServiceContext& context, const tp::FrameHeader& header);
  HandlerStep values(ServiceContext& context, const tp::FrameHeader& header);
  HandlerStep stop(ServiceContext& context, const tp::FrameHeader& header);
  // Ends the current run, if any: engine stopped, links closed, memory given back.
  void end_run(std::string_view why);

  // --- Peer sessions ---
  Status admit_peer() const {
    std::lock_guard lock(mutex_);
    if (run_ == nullptr || run_->stopped) return invalid_argument("no graph run here");
    return Status::ok();
  }
  HandlerStep peer_hello(ServiceContext& context, const tp::FrameHeader& header);
  HandlerStep deltas(ServiceContext& context, const tp::FrameHeader& header);

 private:
  std::shared_ptr<Run> current() const {
    std::lock_guard lock(mutex_);
    return run_;
  }
  // The running run for a coordinator request, or nullptr after answering ERROR.
  std::shared_ptr<Run> require_run(ServiceContext& context, const tp::FrameHeader& header);
  // Reads and decodes the request's payload; nullopt after ending the session.
  std::optional<gr::GraphMessage> read_request(ServiceContext& context, const tp::FrameHeader& header);
  HandlerStep reply(ServiceContext& context, const gr::GraphMessage& message, uint64_t request_id);
  // Opens the run's outbound peer links (those not open yet); false after answering ERROR.
  bool connect_peers(ServiceContext& context, Run& run, uint64_t request_id) {
    const Status linked =
        run.links.connect(run.setup, run.part_index, run.destinations, context, options_.peer_connect_timeout);
    if (linked.is_ok()) return true;
    context.fail(tp::ErrorCode::kPeerFailed, linked.message(), request_id);
    return false;
  }
  HandlerStep reply_ready(ServiceContext& context, const Run& run, uint64_t request_id) {
    return reply(context, gr::GraphReady{run.setup.run_id, run.charge.bytes()}, request_id);
  }

  const GraphServiceOptions options_;
  mutable std::mutex mutex_;
  std::shared_ptr<Run> run_;
};

std::optional<gr::GraphMessage> GraphHost::read_request(ServiceContext& context, const tp::FrameHeader& header) {
  Result<gr::GraphMessage> message = gr::read_graph_payload(context.connection(), header);
  if (!message) {
    context.read_failed(message.status(), header.request_id);
    return std::nullopt;
  }
  return std::move(*message);
}

HandlerStep GraphHost::reply(ServiceContext& context, const gr::GraphMessage& message, uint64_t request_id) {
  const Status sent = gr::write_graph_frame(context.connection(), gr::graph_message_type(message),
                                            gr::encode_graph_parts(message), request_id);
  if (!sent.is_ok()) return context.read_failed(sent, request_id);
  return HandlerStep::kContinue;
}

std::shared_ptr<Run> GraphHost::require_run(ServiceContext& context, const tp::FrameHeader& header) {
  std::shared_ptr<Run> run = current();
  if (run == nullptr) {
    context.fail(tp::ErrorCode::kBadFrame,
                 fmt::format("{} but no graph run is loaded here; send GRAPH_LOAD first",
                             tp::message_type_name(header.type)),
                 header.request_id);
  }
  return run;
}

void GraphHost::end_run(std::string_view why) {
  std::shared_ptr<Run> run;
  {
    std::lock_guard lock(mutex_);
    run = std::move(run_);
  }
  if (run == nullptr) return;
  run->stop();
  // A peer session may still hold the run for the batch it is delivering; the memory is free
  // for the next run now.
  run->charge.reset();
  const uint64_t dropped = run->batches_dropped.load();
  // The engine's own figures, some of which (sweeps) the progress message does not carry: what
  // it takes to see where a run's updates went on each node.
  const gr::EngineProgress figures = run->engine != nullptr ? run->engine->progress() : gr::EngineProgress{};
  log_line(fmt::format("graph run {} (part {} of {}) ended: {}{}; {} updates, {} edge updates, {} sweeps, "
                       "batches {} in / {} out, deltas {} in / {} out, busy {:.3f} s, idle {:.3f} s",
                       run->setup.run_id, run->part_index, run->part_count, why,
                       dropped > 0 ? fmt::format("; {} batches of other runs were dropped", dropped) : "",
                       figures.updates, figures.edge_updates, figures.sweeps, figures.batches_received,
                       figures.batches_sent, figures.deltas_received, figures.deltas_sent, figures.busy_seconds,
                       figures.idle_seconds));
}

HandlerStep GraphHost::load(ServiceContext& context, const tp::FrameHeader& header) {
  end_run("replaced by a new GRAPH_LOAD");
  const uint64_t length = header.payload_length;
  if (Status bounds = gr::check_graph_payload_length(header.type, length, context.limits()); !bounds.is_ok()) {
    return context.fail(tp::ErrorCode::kBadFrame, bounds.message(), header.request_id);
  }
  // Charged before a byte is read: the payload buffer, and the part decoded from it, which is no
  // bigger (every array element takes as many bytes in memory as on the wire).
  const uint64_t claimed = length > std::numeric_limits<uint64_t>::max() / 2 ? std::numeric_limits<uint64_t>::max()
                                                                              : 2 * length;
  Result<MemoryCharge> charge =
      context.store().charge(claimed, fmt::format("GRAPH_LOAD of {} bytes (payload and the part decoded from it)", length));
  if (!charge) return context.fail(tp::ErrorCode::kOutOfMemory, charge.status().message(), header.request_id);
  std::optional<gr::GraphMessage> message = read_request(context, header);
  if (!message) return HandlerStep::kEnd;
  gr::GraphLoad& load = std::get<gr::GraphLoad>(*message);

  auto run = std::make_shared<Run>(load.setup, load.part.part_index, load.part.part_count);
  for (const gr::GhostRef& ghost : load.part.ghosts) run->destinations.push_back(ghost.owner);
  std::sort(run->destinations.begin(), run->destinations.end());
  run->destinations.erase(std::unique(run->destinations.begin(), run->destinations.end()), run->destinations.end());
  const uint64_t vertices = load.part.local_count;
  const uint64_t edges = load.part.edge_count();
  // Engine::create runs GraphPart::validate() first: nothing of an untrusted part is used before.
  Result<std::unique_ptr<gr::Engine>> engine =
      gr::Engine::create(std::move(load.part), load.setup.algorithm, load.setup.engine, run->links);
  if (!engine) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GRAPH_LOAD of run {}, part {} of {}: {}", run->setup.run_id, run->part_index,
                                    run->part_count, engine.status().message()),
                        header.request_id);
  }
  run->engine = std::move(*engine);
  // The payload is gone; what stays is the engine's part and state.
  if (Status fits = charge->resize(run->engine->memory_bytes(), "the graph part and its engine state"); !fits.is_ok()) {
    return context.fail(tp::ErrorCode::kOutOfMemory, fits.message(), header.request_id);
  }
  run->charge = std::move(*charge);
  {
    std::lock_guard lock(mutex_);
    run_ = run;
  }
  context.log(fmt::format("graph run {}: part {} of {} loaded ({}, {} vertices, {} edges, sends to {} parts, {} bytes)",
                          run->setup.run_id, run->part_index, run->part_count, gr::describe(run->setup.algorithm),
                          vertices, edges, run->destinations.size(), run->charge.bytes()));
  return reply_ready(context, *run, header.request_id);
}

HandlerStep GraphHost::start(ServiceContext& context, const tp::FrameHeader& header) {
  if (!read_request(context, header)) return HandlerStep::kEnd;
  std::shared_ptr<Run> run = require_run(context, header);
  if (run == nullptr) return HandlerStep::kEnd;
  if (run->stopped || run->started) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GRAPH_START of run {}, which was already {}; load it again", run->setup.run_id,
                                    run->stopped ? "stopped" : "started"),
                        header.request_id);
  }
  if (!connect_peers(context, *run, header.request_id)) return HandlerStep::kEnd;
  run->engine->start();
  run->started = true;
  return reply_ready(context, *run, header.request_id);
}

HandlerStep GraphHost::step(ServiceContext& context, const tp::FrameHeader& header) {
  std::optional<gr::GraphMessage> message = read_request(context, header);
  if (!message) return HandlerStep::kEnd;
  const gr::GraphStep request = std::get<gr::GraphStep>(*message);
  std::shared_ptr<Run> run = require_run(context, header);
  if (run == nullptr) return HandlerStep::kEnd;
  if (run->stopped || run->started) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GRAPH_STEP {} of run {}, whose engine {}", request.step, run->setup.run_id,
                                    run->stopped ? "was stopped" : "runs asynchronously"),
                        header.request_id);
  }
  if (!connect_peers(context, *run, header.request_id)) return HandlerStep::kEnd;
  if (Status arrived = run->wait_for_step_input(request.step, request.expected_batches, options_.step_wait, context);
      !arrived.is_ok()) {
    const bool peers = arrived.code() == StatusCode::kNetworkError;
    return context.fail(peers ? tp::ErrorCode::kPeerFailed : tp::ErrorCode::kBadFrame, arrived.message(),
                        header.request_id);
  }
  Result<gr::StepReport> report = run->engine->step(request.step);
  if (!report) {
    const bool peers = report.status().code() == StatusCode::kNetworkError;
    return context.fail(peers ? tp::ErrorCode::kPeerFailed : tp::ErrorCode::kInternal,
                        fmt::format("run {}, step {}: {}", run->setup.run_id, request.step, report.status().message()),
                        header.request_id);
  }
  run->forget_steps_before(request.step);
  return reply(context, gr::GraphStepDone{std::move(*report)}, header.request_id);
}

HandlerStep GraphHost::progress(ServiceContext& context, const tp::FrameHeader& header) {
  std::optional<gr::GraphMessage> message = read_request(context, header);
  if (!message) return HandlerStep::kEnd;
  std::shared_ptr<Run> run = require_run(context, header);
  if (run == nullptr) return HandlerStep::kEnd;
  // The type was checked by the dispatch table, so the alternative is a progress request.
  run->engine->set_priority_level(std::get<gr::GraphProgressRequest>(*message).level);
  // An engine whose outbound link failed has stopped its threads and lost a batch: its figures
  // would look idle and settled to the coordinator's termination check, so they are not sent.
  // (Once stopped, sends cut short by closing the links are expected and the figures are final.)
  if (Status failed = run->engine->failure(); !failed.is_ok() && !run->stopped) {
    return context.fail(tp::ErrorCode::kPeerFailed,
                        fmt::format("run {}, part {}: {}", run->setup.run_id, run->part_index, failed.message()),
                        header.request_id);
  }
  gr::NodeProgress progress;
  progress.engine = run->engine->progress();
  progress.peer_bytes_sent = run->links.bytes_sent();
  progress.peer_bytes_received = run->peer_bytes_received.load();
  progress.memory_bytes = run->charge.bytes();
  return reply(context, gr::GraphProgress{progress}, header.request_id);
}

HandlerStep GraphHost::values(ServiceContext& context, const tp::FrameHeader& header) {
  if (!read_request(context, header)) return HandlerStep::kEnd;
  std::shared_ptr<Run> run = require_run(context, header);
  if (run == nullptr) return HandlerStep::kEnd;
  const bool running = run->started && !run->stopped;
  // A running engine's values change under us: copy them between rounds. A stopped (or sync)
  // engine's are final and go out from its own memory.
  const std::vector<double> snapshot = running ? run->engine->snapshot_values() : std::vector<double>{};
  const std::vector<double>& values = running ? snapshot : run->engine->values();
  const Status sent = gr::write_graph_frame(context.connection(), tp::MessageType::kGraphValues,
                                            gr::encode_values_parts(!running, values), header.request_id);
  if (!sent.is_ok()) return context.read_failed(sent, header.request_id);
  return HandlerStep::kContinue;
}

HandlerStep GraphHost::stop(ServiceContext& context, const tp::FrameHeader& header) {
  if (!read_request(context, header)) return HandlerStep::kEnd;
  std::shared_ptr<Run> run = require_run(context, header);
  if (run == nullptr) return HandlerStep::kEnd;
  run->stop();
  return reply_ready(context, *run, header.request_id);
}

HandlerStep GraphHost::peer_hello(ServiceContext& context, const tp::FrameHeader& header) {
  std::optional<gr::GraphMessage> message = read_request(context, header);
  if (!message) return HandlerStep::kEnd;
  const gr::GraphPeerHello hello = std::get<gr::GraphPeerHello>(*message);
  if (context.service_state().has_value()) {
    return context.fail(tp::ErrorCode::kBadFrame, "a second GRAPH_PEER_HELLO on one peer link", header.request_id);
  }
  std::shared_ptr<Run> run = current();
  if (run == nullptr || run->stopped) return context.fail(tp::ErrorCode::kBadFrame, "no graph run here", header.request_id);
  if (hello.run_id != run->setup.run_id) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GRAPH_PEER_HELLO for run {}, but this worker runs run {}", hello.run_id,
                                    run->setup.run_id),
                        header.request_id);
  }
  if (hello.from_part >= run->part_count || hello.from_part == run->part_index) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GRAPH_PEER_HELLO from part {}, but run {} has parts 0..{} and this is part {}",
                                    hello.from_part, run->setup.run_id, run->part_count - 1, run->part_index),
                        header.request_id);
  }
  auto link = std::make_shared<InboundLink>(run, &context.connection(), hello.from_part);
  if (!run->add_inbound(&context.connection())) return context.end("its run ended");
  context.service_state() = link;
  run->peer_bytes_received.fetch_add(tp::kHeaderSize + header.payload_length);
  return HandlerStep::kContinue;
}

HandlerStep GraphHost::deltas(ServiceContext& context, const tp::FrameHeader& header) {
  const auto* link = std::any_cast<std::shared_ptr<InboundLink>>(&context.service_state());
  if (link == nullptr) {
    return context.fail(tp::ErrorCode::kBadFrame, "GRAPH_DELTAS before GRAPH_PEER_HELLO", header.request_id);
  }
  std::optional<gr::GraphMessage> message = read_request(context, header);
  if (!message) return HandlerStep::kEnd;
  std::shared_ptr<Run> run = (*link)->run.lock();
  if (run == nullptr) return context.end("its run ended");
  run->peer_bytes_received.fetch_add(tp::kHeaderSize + header.payload_length);
  gr::GraphDeltas& deltas = std::get<gr::GraphDeltas>(*message);
  if (deltas.run_id != run->setup.run_id) {
    run->batches_dropped.fetch_add(1);
    return HandlerStep::kContinue;
  }
  const uint64_t step = deltas.batch.step;
  const uint32_t from_part = deltas.batch.from_part;
  if (from_part != (*link)->from_part) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GRAPH_DELTAS from part {} on the peer link of part {}", from_part,
                                    (*link)->from_part),
                        header.request_id);
  }
  if (Status delivered = run->engine->deliver(std::move(deltas.batch)); !delivered.is_ok()) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GRAPH_DELTAS of run {}: {}", run->setup.run_id, delivered.message()),
                        header.request_id);
  }
  run->note_delivered(step, from_part);
  return HandlerStep::kContinue;
}

MessageHandler stream(tp::MessageType type, const std::shared_ptr<GraphHost>& host,
                      HandlerStep (GraphHost::*handle)(ServiceContext&, const tp::FrameHeader&)) {
  MessageHandler handler;
  handler.type = type;
  handler.on_stream = [host, handle](ServiceContext& context, const tp::FrameHeader& header) {
    return ((*host).*handle)(context, header);
  };
  return handler;
}

}  // namespace

Service graph_service(const GraphServiceOptions& options) {
  auto host = std::make_shared<GraphHost>(options);
  Service service;
  service.name = "graph";
  service.capability = tp::kCapabilityGraph;
  // GRAPH_* payloads are not transport's to decode, so every handler reads its own (on_stream),
  // within the codec's bounds for its type.
  service.handlers = {stream(tp::MessageType::kGraphLoad, host, &GraphHost::load),
                      stream(tp::MessageType::kGraphStart, host, &GraphHost::start),
                      stream(tp::MessageType::kGraphStep, host, &GraphHost::step),
                      stream(tp::MessageType::kGraphProgressRequest, host, &GraphHost::progress),
                      stream(tp::MessageType::kGraphValuesRequest, host, &GraphHost::values),
                      stream(tp::MessageType::kGraphStop, host, &GraphHost::stop)};
  service.peer_handlers = {stream(tp::MessageType::kGraphPeerHello, host, &GraphHost::peer_hello),
                           stream(tp::MessageType::kGraphDeltas, host, &GraphHost::deltas)};
  service.admit_peer = [host] { return host->admit_peer(); };
  service.on_session_end = [host] { host->end_run("the coordinator session ended"); };
  return service;
}

}  // namespace tessera::worker
