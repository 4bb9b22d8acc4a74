#include "tessera/balance/multiply/resident.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "tessera/balance/cluster/link_calls.hpp"
#include "tessera/gemm/client.hpp"
#include "tessera/linalg/gemm.hpp"
#include "tessera/transport/crc32c.hpp"

namespace tessera::balance::multiply {

namespace {

using ResidentClock = std::chrono::steady_clock;
namespace tp = tessera::transport;

double elapsed_s(ResidentClock::time_point start) { return std::chrono::duration<double>(ResidentClock::now() - start).count(); }

// Runs work(i, connection) for every share's node at once (cluster::on_links: each on its own
// thread, a connection that moves no byte for `timeout_s` shut down). The first failure, named by
// its node, or OK.
template <typename Work>
Status on_share_nodes(cluster::ClusterConnection& cluster, const std::vector<ResidentShare>& shares, double timeout_s,
                      Work&& work) {
  std::vector<cluster::NodeLink*> links;
  for (const ResidentShare& share : shares) links.push_back(&cluster.links()[share.link]);
  const auto silence = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(timeout_s));
  const std::vector<cluster::CallOutcome> outcomes =
      cluster::on_links(links, silence, nullptr, [&](std::size_t i) { return work(i, *links[i]->connection); });
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (outcomes[i].status.is_ok()) continue;
    const std::string& node = links[i]->spec.name;
    if (outcomes[i].silent) {
      return network_error(
          fmt::format("node '{}': unresponsive: no frame for {:.3g} s while it owed a resident product", node, timeout_s));
    }
    return outcomes[i].status.with_context(fmt::format("node '{}': ", node));
  }
  return Status::ok();
}

}  // namespace

ResidentShares resident_rows(uint64_t m, uint64_t k, uint64_t n, std::span<const ResidentNodeCost> nodes) {
  struct Cost {
    std::size_t index;
    double fixed;
    double per_row;
  };
  std::vector<Cost> usable;
  ResidentShares shares;
  shares.rows.assign(nodes.size(), 0);
  const double x_bytes = static_cast<double>(k) * static_cast<double>(n) * sizeof(double);
  const double row_flops = 2.0 * static_cast<double>(k) * static_cast<double>(n);
  const double row_bytes = static_cast<double>(n) * sizeof(double);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const ResidentNodeCost& node = nodes[i];
    if (!(node.flops_per_s > 0.0) || !(node.to_node_bytes_per_s > 0.0) || !(node.from_node_bytes_per_s > 0.0)) {
      shares.left_out.push_back(fmt::format("node '{}' gets no rows: its profile has no rate or link for the product",
                                            node.name));
      continue;
    }
    usable.push_back({i, 2.0 * node.latency_s + x_bytes / node.to_node_bytes_per_s,
                      row_flops / node.flops_per_s + row_bytes / node.from_node_bytes_per_s});
  }
  if (usable.empty() || m == 0) return shares;
  std::sort(usable.begin(), usable.end(), [](const Cost& a, const Cost& b) { return a.fixed < b.fixed; });
  // The first j nodes by fixed cost take part; T for them, kept while it is past the next one's.
  double finish = 0.0;
  std::size_t taking = 0;
  double inverse_sum = 0.0, fixed_over_rate = 0.0;
  for (std::size_t j = 0; j < usable.size(); ++j) {
    inverse_sum += 1.0 / usable[j].per_row;
    fixed_over_rate += usable[j].fixed / usable[j].per_row;
    const double t = (static_cast<double>(m) + fixed_over_rate) / inverse_sum;
    if (j > 0 && t <= usable[j].fixed) break;  // this node's X alone arrives after the others finish
    finish = t;
    taking = j + 1;
  }
  // Rows by the common finish, floors first, then the remainder to the largest fractions.
  std::vector<std::pair<double, std::size_t>> fractions;
  uint64_t given = 0;
  for (std::size_t j = 0; j < taking; ++j) {
    const double exact = std::max(0.0, (finish - usable[j].fixed) / usable[j].per_row);
    const auto whole = static_cast<uint64_t>(std::min(exact, static_cast<double>(m)));
    shares.rows[usable[j].index] = whole;
    given += whole;
    fractions.emplace_back(exact - static_cast<double>(whole), usable[j].index);
  }
  std::sort(fractions.begin(), fractions.end(), std::greater<>());
  for (std::size_t f = 0; given < m; f = (f + 1) % fractions.size(), ++given) ++shares.rows[fractions[f].second];
  while (given > m) {  // floors of a rounded finish can overshoot by a row
    for (std::size_t j = 0; j < taking && given > m; ++j) {
      if (shares.rows[usable[j].index] > 0) {
        --shares.rows[usable[j].index];
        --given;
      }
    }
  }
  shares.forecast_s = 0.0;
  for (std::size_t j = 0; j < taking; ++j) {
    const uint64_t rows = shares.rows[usable[j].index];
    if (rows > 0) shares.forecast_s = std::max(shares.forecast_s, usable[j].fixed + static_cast<double>(rows) * usable[j].per_row);
  }
  for (std::size_t j = taking; j < usable.size(); ++j) {
    shares.left_out.push_back(fmt::format(
        "node '{}' gets no rows: the operand alone takes {:.3g} s to reach it, and the product is forecast to end at "
        "{:.3g} s without it",
        nodes[usable[j].index].name, usable[j].fixed, shares.forecast_s));
  }
  return shares;
}

Result<ResidentMatrix> place_rows(cluster::ClusterConnection& cluster, linalg::MatrixView a,
                                  std::span<const std::size_t> links, std::span<const uint64_t> rows,
                                  const ResidentOptions& options, uint32_t first_tile_id) {
  if (links.size() != rows.size()) return invalid_argument("place_rows: one row count per node");
  uint64_t total = 0;
  for (uint64_t r : rows) total += r;
  if (total != a.rows) {
    return invalid_argument(fmt::format("the shares hold {} rows, the matrix {}", total, a.rows));
  }
  if (a.rows == 0 || a.cols == 0 || a.cols > (1u << 20)) {
    return invalid_argument(fmt::format("a {}x{} matrix cannot be placed", a.rows, a.cols));
  }
  for (std::size_t link : links) {
    if (link >= cluster.links().size()) return invalid_argument("place_rows: a node index beyond the cluster");
  }
  ResidentMatrix placed;
  placed.rows = a.rows;
  placed.cols = a.cols;
  const uint64_t row_bytes = a.cols * sizeof(double);
  const uint64_t tile_rows = std::max<uint64_t>(1, std::min<uint64_t>(options.largest_tile_bytes / row_bytes, 1u << 20));
  uint32_t next_id = first_tile_id;
  uint64_t row = 0;
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (rows[i] == 0) continue;
    ResidentShare share;
    share.link = links[i];
    share.row_begin = row;
    share.rows = rows[i];
    for (uint64_t done = 0; done < rows[i]; done += tile_rows) {
      share.tile_ids.push_back(next_id++);
      share.tile_rows.push_back(static_cast<uint32_t>(std::min(tile_rows, rows[i] - done)));
    }
    row += rows[i];
    placed.shares.push_back(std::move(share));
  }

  // The check's matrix side, one pass over A: s = r^T A and |r|^T |A|.
  std::mt19937_64 random(options.seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  placed.check_vector.resize(a.rows);
  for (double& v : placed.check_vector) v = uniform(random);
  placed.check_row.assign(a.cols, 0.0);
  placed.check_magnitude.assign(a.cols, 0.0);
  for (uint64_t r = 0; r < a.rows; ++r) {
    const double weight = placed.check_vector[r];
    const double* values = a.row(r);
    for (uint64_t c = 0; c < a.cols; ++c) {
      placed.check_row[c] += weight * values[c];
      placed.check_magnitude[c] += std::abs(weight) * std::abs(values[c]);
    }
  }

  Status stored = on_share_nodes(cluster, placed.shares, options.node_timeout_s,
                                 [&](std::size_t i, tp::FrameConnection& connection) -> Status {
    const ResidentShare& share = placed.shares[i];
    gemm::GemmClient client(connection);
    uint64_t first = share.row_begin;
    for (std::size_t t = 0; t < share.tile_ids.size(); ++t) {
      const uint32_t tile_rows_here = share.tile_rows[t];
      tp::Crc32c crc;
      for (uint32_t r = 0; r < tile_rows_here; ++r) crc.update(a.row(first + r), row_bytes);
      TESSERA_RETURN_IF_ERROR(client.store_rows(share.tile_ids[t], tile_rows_here, static_cast<uint32_t>(a.cols),
                                                a.row(first), a.ld, crc.value()));
      first += tile_rows_here;
    }
    // A STORE has no answer; STATS comes after every earlier frame was handled, so a store the
    // worker refused (its tile memory full) is this ERROR.
    return client.stats().status();
  });
  if (!stored) {
    release_resident(cluster, placed);
    return stored;
  }
  for (const ResidentShare& share : placed.shares) placed.bytes_placed += share.rows * row_bytes;
  return placed;
}

Result<ResidentProduct> multiply_resident(cluster::ClusterConnection& cluster, const ResidentMatrix& a,
                                          linalg::MatrixView x, linalg::MutableMatrixView y,
                                          const ResidentOptions& options) {
  if (x.rows != a.cols || x.cols == 0 || y.rows != a.rows || y.cols != x.cols) {
    return invalid_argument(fmt::format("A is {}x{}, X {}x{} and Y {}x{}: X needs A's columns as rows, Y A's rows and "
                                        "X's columns",
                                        a.rows, a.cols, x.rows, x.cols, y.rows, y.cols));
  }
  if (x.cols > (1u << 20)) return invalid_argument("X has more columns than one tile holds");
  std::vector<double> packed_x;
  const double* x_rows = x.data;
  if (!x.contiguous()) {
    packed_x.resize(x.rows * x.cols);
    for (std::size_t r = 0; r < x.rows; ++r) std::copy_n(x.row(r), x.cols, packed_x.data() + r * x.cols);
    x_rows = packed_x.data();
  }
  const auto n = static_cast<uint32_t>(x.cols);
  const auto k = static_cast<uint32_t>(a.cols);
  const std::span<const double> x_values(x_rows, x.rows * x.cols);
  const uint32_t x_crc = tp::crc32c(std::as_bytes(x_values));
  // The ids of this product's X and outputs, past the resident tiles'.
  const uint32_t x_id = kFirstResidentTileId - 1;
  const uint32_t first_output_id = kFirstResidentTileId - 1 - (1u << 20);

  ResidentProduct product;
  product.nodes.resize(a.shares.size());
  const auto start = ResidentClock::now();
  Status ran = on_share_nodes(cluster, a.shares, options.node_timeout_s,
                              [&](std::size_t i, tp::FrameConnection& connection) -> Status {
    const ResidentShare& share = a.shares[i];
    ResidentNodeRun& run = product.nodes[i];
    run.link = share.link;
    const uint64_t sent_before = connection.bytes_sent();
    const uint64_t received_before = connection.bytes_received();
    gemm::GemmClient client(connection);
    TESSERA_RETURN_IF_ERROR(client.store(x_id, k, n, x_rows, x_crc));
    for (std::size_t t = 0; t < share.tile_ids.size(); ++t) {
      gemm::Job job;
      job.job_id = t + 1;
      job.flags = gemm::kJobCreateOutput | gemm::kJobSendResult;
      if (t + 1 == share.tile_ids.size()) job.flags |= gemm::kJobReleaseB;
      job.a_tile = share.tile_ids[t];
      job.b_tile = x_id;
      job.c_tile = first_output_id + static_cast<uint32_t>(t);
      job.m = share.tile_rows[t];
      job.n = n;
      job.k = k;
      job.c_rows = job.m;
      job.c_cols = n;
      TESSERA_RETURN_IF_ERROR(client.job(job));
    }
    // One CREDIT and one RESULT per job; each result lands in Y's rows of its tile.
    std::vector<uint64_t> first_row(share.tile_ids.size());
    for (std::size_t t = 0, row = share.row_begin; t < share.tile_ids.size(); row += share.tile_rows[t], ++t) {
      first_row[t] = row;
    }
    std::vector<double> landing;
    std::vector<uint32_t> outputs;
    for (std::size_t replies = 0; replies < 2 * share.tile_ids.size(); ++replies) {
      Result<gemm::GemmClient::Reply> reply = client.next({tp::MessageType::kCredit, tp::MessageType::kResult});
      if (!reply) return reply.status();
      if (const auto* credit = std::get_if<gemm::Credit>(&*reply)) {
        run.compute_s += credit->compute_seconds;
        continue;
      }
      const auto& result = std::get<gemm::GemmClient::ResultHeader>(*reply);
      const uint64_t t = result.tile.tile_id - first_output_id;
      if (t >= share.tile_ids.size() || result.tile.rows != share.tile_rows[t] || result.tile.cols != n) {
        return protocol_error(fmt::format("a RESULT for tile {} ({}x{}) that no job asked for", result.tile.tile_id,
                                          result.tile.rows, result.tile.cols));
      }
      landing.resize(uint64_t{result.tile.rows} * n);
      TESSERA_RETURN_IF_ERROR(client.read_result(result, landing));
      for (uint32_t r = 0; r < result.tile.rows; ++r) {
        std::copy_n(landing.data() + uint64_t{r} * n, n, y.row(first_row[t] + r));
      }
      outputs.push_back(result.tile.tile_id);
    }
    TESSERA_RETURN_IF_ERROR(client.release(outputs));
    run.finish_s = elapsed_s(start);
    run.bytes_to_node = connection.bytes_sent() - sent_before;
    run.bytes_from_node = connection.bytes_received() - received_before;
    return Status::ok();
  });
  if (!ran) return ran;
  product.seconds = elapsed_s(start);

  // r^T Y against s X, within |r|^T |A| |X| times the rounding allowance of a length-k sum.
  const auto check_start = ResidentClock::now();
  Verification& check = product.verification;
  check.mode = VerifyMode::kFreivalds;
  const double allowance = kBoundSafety * static_cast<double>(k + a.rows + 2) * kUnitRoundoff;
  check.passed = true;
  for (uint32_t j = 0; j < n && check.passed; ++j) {
    double from_y = 0.0, from_a = 0.0, magnitude = 0.0;
    for (uint64_t r = 0; r < a.rows; ++r) from_y += a.check_vector[r] * y.row(r)[j];
    for (uint32_t c = 0; c < k; ++c) {
      const double xv = x_rows[uint64_t{c} * n + j];
      from_a += a.check_row[c] * xv;
      magnitude += a.check_magnitude[c] * std::abs(xv);
    }
    const double bound = allowance * magnitude;
    const double error = std::abs(from_y - from_a);
    check.max_abs_error = std::max(check.max_abs_error, error);
    const double ratio = bound > 0.0 ? error / bound : (error == 0.0 ? 0.0 : INFINITY);
    check.max_error_ratio = std::max(check.max_error_ratio, ratio);
    if (!(ratio <= 1.0)) {
      check.passed = false;
      check.detail = fmt::format("column {} of Y: r^T Y = {:.17g} but (r^T A) X = {:.17g}, {:.3g} apart where "
                                 "rounding allows {:.3g}",
                                 j, from_y, from_a, error, bound);
    }
  }
  if (check.passed) check.detail = fmt::format("Freivalds with the placed check vector over {} columns", n);
  check.seconds = product.verification_seconds = elapsed_s(check_start);
  return product;
}

void release_resident(cluster::ClusterConnection& cluster, const ResidentMatrix& a) {
  for (const ResidentShare& share : a.shares) {
    cluster::NodeLink& link = cluster.links()[share.link];
    if (!link.connection) continue;
    gemm::GemmClient client(*link.connection);
    (void)client.release(share.tile_ids);
  }
}

}  // namespace tessera::balance::multiply
