#include "tessera/worker/service.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/core.h>

#include "tessera/worker/thread_cpu.hpp"
#include "tessera/gemm/wire_io.hpp"
#include "worker_log.hpp"

namespace tessera::worker {

namespace tp = tessera::transport;

ServiceContext::ServiceContext(tp::FrameConnection& connection, TileStore& store, ComputePool& pool,
                               const std::atomic<bool>& stopping, const std::string& secret, BlockKeeper* blocks)
    : connection_(connection),
      store_(store),
      pool_(pool),
      blocks_(blocks),
      stopping_(stopping),
      secret_(secret),
      peer_(connection.peer()) {}

ServiceContext::~ServiceContext() {
  flush_writes();
  {
    std::lock_guard lock(writes_mutex_);
    writer_stop_ = true;
  }
  writes_changed_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void ServiceContext::write_later(std::function<void()> write) {
  {
    std::lock_guard lock(writes_mutex_);
    writes_.push_back(std::move(write));
    if (!writer_.joinable()) {
      writer_ = std::thread([this] {
        std::unique_lock queue(writes_mutex_);
        for (;;) {
          writes_changed_.wait(queue, [this] { return writer_stop_ || !writes_.empty(); });
          if (writes_.empty()) return;  // stopping, nothing left
          std::function<void()> next = std::move(writes_.front());
          writes_.pop_front();
          write_running_ = true;
          queue.unlock();
          const double cpu_start = thread_cpu_seconds();
          next();
          writer_cpu_ns_.fetch_add(static_cast<int64_t>((thread_cpu_seconds() - cpu_start) * 1e9));
          queue.lock();
          write_running_ = false;
          writes_changed_.notify_all();
        }
      });
    }
  }
  writes_changed_.notify_all();
}

void ServiceContext::flush_writes() {
  std::unique_lock lock(writes_mutex_);
  writes_changed_.wait(lock, [this] { return writes_.empty() && !write_running_; });
}

bool ServiceContext::stopping() const {
  if (stopping_.load() || peer_gone_.load()) return true;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t due = next_peer_check_ns_.load();
  // One caller per period looks; the others keep the answer they had.
  if (now < due || !next_peer_check_ns_.compare_exchange_strong(due, now + 50'000'000)) return false;
  if (connection_.peer_closed()) peer_gone_ = true;
  return peer_gone_.load();
}

void ServiceContext::start_counting() {
  started_ = std::chrono::steady_clock::now();
  connection_cpu_start_ = thread_cpu_seconds();
  pool_start_ = pool_.totals();
  bytes_received_start_ = connection_.bytes_received();
  bytes_sent_start_ = connection_.bytes_sent();
  connection_compute_cpu_ = 0.0;
  jobs_finished_ = 0;
  writer_cpu_ns_ = 0;
}

void ServiceContext::add_connection_compute_cpu(double seconds) {
  connection_compute_cpu_ += std::max(seconds, 0.0);
}

gemm::Stats ServiceContext::stats() const {
  const ComputePool::Totals pool = pool_.totals();
  gemm::Stats out;
  out.session_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const double connection_cpu = thread_cpu_seconds() - connection_cpu_start_;
  out.io_cpu_seconds = std::max(connection_cpu - connection_compute_cpu_, 0.0) +
                       (pool.io_cpu_seconds - pool_start_.io_cpu_seconds) +
                       1e-9 * static_cast<double>(writer_cpu_ns_.load());
  out.compute_cpu_seconds =
      connection_compute_cpu_ + (pool.compute_cpu_seconds - pool_start_.compute_cpu_seconds);
  out.compute_wall_seconds = pool.wall_seconds - pool_start_.wall_seconds;
  out.jobs = jobs_finished_.load();
  out.bytes_received = connection_.bytes_received() - bytes_received_start_;
  out.bytes_sent = connection_.bytes_sent() - bytes_sent_start_;
  // The codec refuses negative values; clamping keeps a clock oddity from making the reply undecodable.
  for (double* value : {&out.session_seconds, &out.io_cpu_seconds, &out.compute_cpu_seconds,
                        &out.compute_wall_seconds}) {
    *value = std::max(*value, 0.0);
  }
  return out;
}

HandlerStep ServiceContext::fail(tp::ErrorCode code, const std::string& message, uint64_t request_id) {
  log(fmt::format("sending ERROR {}: {}", static_cast<uint32_t>(code), message));
  connection_.write_error(code, message, request_id);
  end_reason_ = "error: " + message;
  return HandlerStep::kEnd;
}

HandlerStep ServiceContext::read_failed(const Status& status, uint64_t request_id) {
  if (status.code() == StatusCode::kNetworkError) return end(status.message());
  if (status.code() == StatusCode::kResourceExhausted) {
    return fail(tp::ErrorCode::kOutOfMemory, status.message(), request_id);
  }
  return fail(tp::ErrorCode::kBadFrame, status.message(), request_id);
}

HandlerStep ServiceContext::end(std::string reason) {
  end_reason_ = std::move(reason);
  return HandlerStep::kEnd;
}

void ServiceContext::log(std::string_view line) const { log_line(fmt::format("session with {}: {}", peer_, line)); }

namespace {

// Frames the session answers itself, whatever services it hosts.
bool owned_by_session(tp::MessageType type) {
  switch (type) {
    case tp::MessageType::kHello:
    case tp::MessageType::kAuth:
    case tp::MessageType::kAuthOk:
    case tp::MessageType::kError:
    case tp::MessageType::kBye: return true;
    default: return false;
  }
}

}  // namespace

Status ServiceTable::add_handlers(SlotTable& table, const std::vector<Service>& services, std::size_t s, bool peer) {
  const Service& service = services[s];
  const std::vector<MessageHandler>& handlers = peer ? service.peer_handlers : service.handlers;
  for (std::size_t h = 0; h < handlers.size(); ++h) {
    const MessageHandler& handler = handlers[h];
    const auto type = static_cast<uint16_t>(handler.type);
    const std::string what = fmt::format("worker service '{}': {}handler for {}", service.name, peer ? "peer " : "",
                                         tp::message_type_name(type));
    if (type < 1 || type > tp::kLastMessageType) return invalid_argument(what + ": not a message type");
    if (owned_by_session(handler.type)) {
      return invalid_argument(what + ": the session itself answers that message");
    }
    if (static_cast<bool>(handler.on_message) == static_cast<bool>(handler.on_stream)) {
      return invalid_argument(what + ": set exactly one of on_message and on_stream");
    }
    const Slot& taken = table[type];
    if (taken.used) {
      return invalid_argument(what + ": service '" + services[taken.service].name + "' already handles it");
    }
    table[type] = Slot{true, s, h};
  }
  return Status::ok();
}

Result<ServiceTable> ServiceTable::build(std::vector<Service> services) {
  ServiceTable table;
  for (std::size_t s = 0; s < services.size(); ++s) {
    const Service& service = services[s];
    if (service.name.empty()) return invalid_argument(fmt::format("worker service #{} has no name", s + 1));
    for (std::size_t earlier = 0; earlier < s; ++earlier) {
      if (services[earlier].name == service.name) {
        return invalid_argument(fmt::format("worker service '{}' is registered twice", service.name));
      }
    }
    TESSERA_RETURN_IF_ERROR(add_handlers(table.by_type_, services, s, /*peer=*/false));
    TESSERA_RETURN_IF_ERROR(add_handlers(table.peer_by_type_, services, s, /*peer=*/true));
    if (!service.peer_handlers.empty()) {
      if (!service.admit_peer) {
        return invalid_argument(fmt::format("worker service '{}' has peer handlers but no admit_peer", service.name));
      }
      table.takes_peers_ = true;
    }
    table.capabilities_ |= service.capability;
  }
  table.services_ = std::move(services);
  return table;
}

const MessageHandler* ServiceTable::find_in(const SlotTable& table, const std::vector<Service>& services, uint16_t type,
                                            bool peer) {
  if (type >= table.size() || !table[type].used) return nullptr;
  const Slot& slot = table[type];
  const Service& service = services[slot.service];
  return &(peer ? service.peer_handlers : service.handlers)[slot.handler];
}

const MessageHandler* ServiceTable::find(uint16_t type) const { return find_in(by_type_, services_, type, false); }

const MessageHandler* ServiceTable::find_peer(uint16_t type) const {
  return find_in(peer_by_type_, services_, type, true);
}

Status ServiceTable::admit_peer() const {
  std::optional<Status> refusal;
  for (const Service& service : services_) {
    if (service.peer_handlers.empty()) continue;
    Status admitted = service.admit_peer();
    if (admitted.is_ok()) return admitted;
    if (!refusal) refusal = std::move(admitted);
  }
  if (refusal) return *refusal;
  return invalid_argument("this worker takes no peer links (services: " + describe() + ")");
}

void ServiceTable::end_session() const {
  for (const Service& service : services_) {
    if (service.on_session_end) service.on_session_end();
  }
}

std::string ServiceTable::describe() const {
  if (services_.empty()) return "no services";
  std::string out;
  for (const Service& service : services_) {
    if (!out.empty()) out += "; ";
    out += service.name + " (";
    for (std::size_t h = 0; h < service.handlers.size(); ++h) {
      if (h > 0) out += ", ";
      out += tp::message_type_name(static_cast<uint16_t>(service.handlers[h].type));
    }
    for (std::size_t h = 0; h < service.peer_handlers.size(); ++h) {
      out += h == 0 ? "; from peers: " : ", ";
      out += tp::message_type_name(static_cast<uint16_t>(service.peer_handlers[h].type));
    }
    out += ")";
  }
  return out;
}

}  // namespace tessera::worker
