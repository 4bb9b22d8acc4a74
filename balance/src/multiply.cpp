#include "tessera/balance/multiply.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "driver_common.hpp"

namespace tessera::balance {

namespace {

using Clock = std::chrono::steady_clock;
namespace tp = tessera::transport;
using detail::encode_panels;
using detail::kFirstPanelTile;
using detail::PanelFrame;
using detail::seconds_between;

constexpr uint32_t kTileA = 1;
constexpr uint32_t kTileC = 2;

// Shared failure state: the first real failure wins; failures caused by the shutdown that
// follows it are not reported.
class RunAbort {
 public:
  explicit RunAbort(ClusterConnection& cluster) : cluster_(cluster) {}
  void fail(Status status) {
    {
      std::lock_guard lock(mutex_);
      if (first_failure_) return;
      first_failure_ = std::move(status);
      aborted_.store(true);
    }
    cluster_.shutdown_all();
  }
  bool aborted() const { return aborted_.load(); }
  std::optional<Status> failure() const {
    std::lock_guard lock(mutex_);
    return first_failure_;
  }

 private:
  ClusterConnection& cluster_;
  mutable std::mutex mutex_;
  std::optional<Status> first_failure_;
  std::atomic<bool> aborted_{false};
};

class NodeStreamer {
 public:
  NodeStreamer(std::size_t index, NodeLink& link, const Plan& plan, const std::vector<PanelFrame>& panels,
               const Matrix& a, Matrix& c, Clock::time_point start, const MultiplyHooks& hooks)
      : index_(index), link_(link), connection_(*link.connection), plan_(plan), share_(plan.shares[index]),
        panels_(panels), a_(a), c_(c), start_(start), hooks_(hooks) {}

  Status run(NodeRunStats& stats) {
    const uint64_t sent_before = connection_.bytes_sent();
    const uint64_t received_before = connection_.bytes_received();
    Status status = stream(stats);
    stats.bytes_to_node = connection_.bytes_sent() - sent_before;
    stats.bytes_from_node = connection_.bytes_received() - received_before;
    stats.comm_s = comm_seconds_;
    stats.panels = panels_.size();
    if (!status.is_ok()) {
      return status.with_context(fmt::format("node '{}' ({}) failed after {} of {} panels: ", link_.spec.name,
                                             link_.spec.endpoint(), jobs_done_, panels_.size()));
    }
    return status;
  }

 private:
  template <typename Write>
  Status timed_write(Write&& write) {
    const auto before = Clock::now();
    Status status = write();
    comm_seconds_ += seconds_between(before, Clock::now());
    return status;
  }

  Status check_memory() const {
    const uint64_t rows = share_.rows.count;
    const uint64_t bytes = 8 * (rows * plan_.k + rows * plan_.n +
                                uint64_t{plan_.panels_in_flight} * plan_.panel_width * plan_.n);
    if (link_.hello.tile_memory_cap != 0 && bytes > link_.hello.tile_memory_cap) {
      return resource_exhausted(fmt::format(
          "its share needs {:.1f} MiB of tile memory but the worker allows {:.1f} MiB; give it more "
          "(tessera-worker --memory-cap-mb) or lower --panels-in-flight / --panel-width",
          bytes / 1048576.0, link_.hello.tile_memory_cap / 1048576.0));
    }
    return Status::ok();
  }

  Status send_a_block() {
    const tp::TilePrefix tile{kTileA, static_cast<uint32_t>(share_.rows.count), static_cast<uint32_t>(plan_.k)};
    const auto prefix = tp::encode_store_prefix(tile);
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kStore);
    const std::array<asio::const_buffer, 2> parts{
        asio::buffer(prefix),
        asio::buffer(a_.row(share_.rows.begin), share_.rows.count * plan_.k * sizeof(double))};
    return timed_write([&] { return connection_.write_frame(header, parts); });
  }

  Status send_panel(std::size_t p) {
    const PanelFrame& panel = panels_[p];
    const std::array<asio::const_buffer, 3> parts{asio::buffer(panel.header), asio::buffer(panel.prefix),
                                                  asio::buffer(panel.data, panel.data_bytes)};
    TESSERA_RETURN_IF_ERROR(timed_write([&] { return connection_.write_buffers(parts); }));

    tp::Job job;
    job.job_id = p;
    job.flags = tp::kJobReleaseB;
    if (p == 0) job.flags |= tp::kJobCreateOutput;
    if (p + 1 == panels_.size()) job.flags |= tp::kJobSendResult | tp::kJobReleaseA;
    job.a_tile = kTileA;
    job.b_tile = static_cast<uint32_t>(kFirstPanelTile + p);
    job.c_tile = kTileC;
    job.a_col = static_cast<uint32_t>(panel.row_begin);
    job.m = static_cast<uint32_t>(share_.rows.count);
    job.n = static_cast<uint32_t>(plan_.n);
    job.k = panel.rows;
    job.c_rows = job.m;
    job.c_cols = job.n;
    return timed_write([&] { return connection_.write_message(job, p); });
  }

  Status receive_result(const tp::FrameHeader& header, NodeRunStats& stats) {
    const auto before = Clock::now();
    std::array<std::byte, tp::kResultPrefixSize> prefix_bytes;
    TESSERA_RETURN_IF_ERROR(connection_.read_exact(prefix_bytes));
    Result<tp::ResultPrefix> prefix =
        tp::decode_result_prefix(prefix_bytes, header.payload_length, connection_.limits());
    if (!prefix) return prefix.status();
    if (prefix->tile.tile_id != kTileC || prefix->tile.rows != share_.rows.count || prefix->tile.cols != plan_.n) {
      return protocol_error(fmt::format("RESULT for tile {} of {}x{}; expected tile {} of {}x{}", prefix->tile.tile_id,
                                        prefix->tile.rows, prefix->tile.cols, kTileC, share_.rows.count, plan_.n));
    }
    std::span<std::byte> destination(reinterpret_cast<std::byte*>(c_.row(share_.rows.begin)),
                                     share_.rows.count * plan_.n * sizeof(double));
    TESSERA_RETURN_IF_ERROR(connection_.read_exact(destination));
    comm_seconds_ += seconds_between(before, Clock::now());
    stats.compute_s = prefix->compute_seconds;
    return Status::ok();
  }

  Status stream(NodeRunStats& stats) {
    if (share_.rows.count == 0) return Status::ok();
    TESSERA_RETURN_IF_ERROR(check_memory());
    TESSERA_RETURN_IF_ERROR(send_a_block());

    uint32_t credits = plan_.panels_in_flight;
    std::size_t next_panel = 0;
    bool have_result = false;
    while (!have_result || jobs_done_ < panels_.size()) {
      while (next_panel < panels_.size() && credits > 0) {
        TESSERA_RETURN_IF_ERROR(send_panel(next_panel));
        ++next_panel;
        --credits;
      }
      Result<tp::FrameHeader> header = connection_.read_header();
      if (!header) return header.status();
      switch (static_cast<tp::MessageType>(header->type)) {
        case tp::MessageType::kCredit: {
          Result<tp::IncomingFrame> frame = connection_.read_payload(*header);
          if (!frame) return frame.status();
          const auto& credit = std::get<tp::Credit>(frame->message);
          credits += credit.credits;
          ++jobs_done_;
          if (hooks_.on_credit) hooks_.on_credit(index_, jobs_done_);
          break;
        }
        case tp::MessageType::kResult:
          if (have_result) return protocol_error("a second RESULT arrived");
          TESSERA_RETURN_IF_ERROR(receive_result(*header, stats));
          have_result = true;
          stats.finish_s = seconds_between(start_, Clock::now());
          break;
        case tp::MessageType::kError: {
          Result<tp::IncomingFrame> frame = connection_.read_payload(*header);
          if (!frame) return frame.status();
          return Status(StatusCode::kNetworkError,
                        "the worker reported: " + std::get<tp::Error>(frame->message).message);
        }
        default:
          return protocol_error(fmt::format("unexpected {} during a multiply",
                                            tp::message_type_name(header->type)));
      }
    }
    return Status::ok();
  }

  std::size_t index_;
  NodeLink& link_;
  tp::FrameConnection& connection_;
  const Plan& plan_;
  const NodeShare& share_;
  const std::vector<PanelFrame>& panels_;
  const Matrix& a_;
  Matrix& c_;
  Clock::time_point start_;
  const MultiplyHooks& hooks_;
  uint64_t jobs_done_ = 0;
  double comm_seconds_ = 0.0;
};

Status check_inputs(const ClusterConnection& cluster, const Plan& plan, const Matrix& a, const Matrix& b) {
  if (a.rows != plan.m || a.cols != plan.k) {
    return invalid_argument(fmt::format("A is {}x{} but the plan needs {}x{}", a.rows, a.cols, plan.m, plan.k));
  }
  if (b.rows != plan.k || b.cols != plan.n) {
    return invalid_argument(fmt::format("B is {}x{} but the plan needs {}x{} (A's columns must equal B's rows)",
                                        b.rows, b.cols, plan.k, plan.n));
  }
  if (plan.shares.size() != cluster.links().size()) {
    return invalid_argument(fmt::format("the plan has {} nodes, the cluster {}", plan.shares.size(),
                                        cluster.links().size()));
  }
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    if (plan.shares[i].node_name != cluster.links()[i].spec.name) {
      return invalid_argument(fmt::format("plan node {} is '{}' but cluster node {} is '{}'", i,
                                          plan.shares[i].node_name, i, cluster.links()[i].spec.name));
    }
  }
  if (plan.panel_width == 0 || plan.panels_in_flight == 0) return invalid_argument("plan has no panels");
  return Status::ok();
}

}  // namespace

Result<MultiplyRun> run_multiply(ClusterConnection& cluster, const Plan& plan, const Matrix& a, const Matrix& b,
                                 Matrix& c, const MultiplyHooks& hooks) {
  TESSERA_RETURN_IF_ERROR(check_inputs(cluster, plan, a, b));
  if (c.rows != plan.m || c.cols != plan.n) c = Matrix(plan.m, plan.n);

  const std::vector<PanelFrame> panels = encode_panels(plan, b);
  MultiplyRun run;
  run.nodes.resize(plan.shares.size());
  RunAbort abort(cluster);
  const auto start = Clock::now();
  {
    std::vector<std::jthread> streamers;
    for (std::size_t i = 0; i < plan.shares.size(); ++i) {
      NodeRunStats& stats = run.nodes[i];
      stats.name = plan.shares[i].node_name;
      stats.rows = plan.shares[i].rows.count;
      stats.weight = plan.shares[i].weight;
      streamers.emplace_back([&, i] {
        NodeStreamer streamer(i, cluster.links()[i], plan, panels, a, c, start, hooks);
        Status status = streamer.run(run.nodes[i]);
        if (!status.is_ok() && !abort.aborted()) abort.fail(std::move(status));
      });
    }
  }
  if (auto failure = abort.failure()) return *failure;

  detail::complete_run_statistics(plan, run);
  return run;
}

}  // namespace tessera::balance
