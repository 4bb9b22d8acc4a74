// Holding a resident matrix (resident.hpp): placing its pieces, moving them between nodes, the
// products on them with their check, surviving a lost node, and releasing them. Choosing the
// shares is resident_shares.cpp's.
#include "tessera/balance/multiply/resident.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/balance/cluster/link_calls.hpp"
#include "tessera/gemm/client.hpp"
#include "tessera/linalg/gemm.hpp"
#include "tessera/transport/block_key.hpp"
#include "tessera/transport/crc32c.hpp"

namespace tessera::balance::multiply {

namespace {

using ResidentClock = std::chrono::steady_clock;
constexpr uint64_t kSmallestPieceBytes = uint64_t{4} << 20;
namespace tp = tessera::transport;

double elapsed_s(ResidentClock::time_point start) { return std::chrono::duration<double>(ResidentClock::now() - start).count(); }

// Runs work(i, connection) for every share's node at once (cluster::on_links: each on its own
// thread, a connection that moves no byte for `timeout_s` shut down). The first failure, named by
// its node, or OK. A node whose call failed is in no known state: its connection is dropped (the
// worker's session, and every piece it held, end with it), which is how the callers tell the
// nodes lost from the others.
template <typename Work>
Status on_share_nodes(cluster::ClusterConnection& cluster, const std::vector<ResidentShare>& shares, double timeout_s,
                      Work&& work) {
  std::vector<cluster::NodeLink*> links;
  for (const ResidentShare& share : shares) links.push_back(&cluster.links()[share.link]);
  const auto silence = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(timeout_s));
  for (cluster::NodeLink* link : links) {
    if (!link->connection) return network_error(fmt::format("node '{}': lost earlier in this session", link->spec.name));
  }
  const std::vector<cluster::CallOutcome> outcomes =
      cluster::on_links(links, silence, nullptr, [&](std::size_t i) { return work(i, *links[i]->connection); });
  Status first = Status::ok();
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (outcomes[i].status.is_ok()) continue;
    const std::string& node = links[i]->spec.name;
    Status failed = outcomes[i].silent
                        ? network_error(fmt::format("node '{}': unresponsive: no frame for {:.3g} s while it owed a "
                                                    "resident product",
                                                    node, timeout_s))
                        : outcomes[i].status.with_context(fmt::format("node '{}': ", node));
    if (first.is_ok()) first = std::move(failed);
    links[i]->connection->shutdown();
    links[i]->connection.reset();
  }
  return first;
}

// What reaching a node with its pieces cost: the bytes sent, and those a node's block store had.
struct PieceTraffic {
  uint64_t sent = 0;
  uint64_t reused = 0;
};

// Whether the pieces placed on `link` go through its block store.
bool uses_block_store(const cluster::NodeLink& link, const ResidentOptions& options) {
  return options.use_block_stores && (link.hello.capabilities & tp::kCapabilityBlockStore) != 0;
}

// STOREs the pieces' rows of `a` on the node and waits for it to have filed them: a STORE has no
// answer, and STATS comes after every earlier frame was handled, so a store the worker refused
// (its tile memory full) is this ERROR. With the node's block store (`use_store`) the pieces it
// holds from an earlier session are loaded there instead (one BLOCK_LOAD), and the rest are sent
// to be kept.
Status store_pieces(tp::FrameConnection& connection, bool use_store, linalg::MatrixView a,
                    std::span<const ResidentBlock> pieces, PieceTraffic& traffic) {
  gemm::GemmClient client(connection);
  const uint64_t row_bytes = a.cols * sizeof(double);
  std::vector<bool> loaded(pieces.size(), false);
  std::vector<gemm::BlockToLoad> blocks;
  if (use_store && !pieces.empty()) {
    // Each piece asked for as soon as it is keyed, so the node loads one while this thread hashes
    // the next; the answers are read once all are asked.
    blocks.reserve(pieces.size());
    for (const ResidentBlock& piece : pieces) {
      Result<tp::BlockKey> key = tp::block_key(piece.rows, static_cast<uint32_t>(a.cols), a.row(piece.row_begin), a.ld);
      if (!key) return key.status();
      blocks.push_back({*key, piece.tile_id, piece.rows, static_cast<uint32_t>(a.cols)});
      TESSERA_RETURN_IF_ERROR(client.send_block_load(std::span<const gemm::BlockToLoad>(&blocks.back(), 1)));
    }
    Result<std::vector<bool>> got = client.read_blocks_loaded(blocks.size());
    if (!got) return got.status();
    loaded = std::move(*got);
  }
  for (std::size_t p = 0; p < pieces.size(); ++p) {
    const ResidentBlock& piece = pieces[p];
    if (loaded[p]) {
      traffic.reused += piece.rows * row_bytes;
      continue;
    }
    tp::Crc32c crc;
    for (uint32_t r = 0; r < piece.rows; ++r) crc.update(a.row(piece.row_begin + r), row_bytes);
    TESSERA_RETURN_IF_ERROR(client.store_rows(piece.tile_id, piece.rows, static_cast<uint32_t>(a.cols),
                                              a.row(piece.row_begin), a.ld, crc.value(), use_store));
    traffic.sent += piece.rows * row_bytes;
  }
  if (use_store && traffic.sent > 0) {
    // The worker keeps what it was sent on its own thread, and answers a query only after those
    // writes: waiting here puts the writes in the placement's time rather than in the first
    // products' (a capped node writing its pieces measured as a slow node, and lost rows for it).
    std::vector<tp::BlockKey> sent;
    for (std::size_t p = 0; p < pieces.size(); ++p) {
      if (!loaded[p]) sent.push_back(blocks[p].key);
    }
    TESSERA_RETURN_IF_ERROR(client.query_blocks(sent).status());
  }
  return client.stats().status();
}

}  // namespace

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
  const uint64_t row_bytes = a.cols * sizeof(double);
  const uint64_t by_size = std::max<uint64_t>(1, std::min<uint64_t>(options.largest_tile_bytes / row_bytes, 1u << 20));
  const uint64_t by_count = (a.rows + std::max<uint64_t>(1, options.grid_pieces) - 1) / std::max<uint64_t>(1, options.grid_pieces);
  // Every piece is a job per product (a few tens of microseconds on the worker and here): pieces
  // of 4096-wide rows cut to 1 MiB made a 4096 x 4096 product on one node 60% slower than BLAS;
  // at least 4 MiB.
  const uint64_t by_floor = (kSmallestPieceBytes + row_bytes - 1) / row_bytes;
  const uint64_t block_rows = std::max<uint64_t>(1, std::min(by_size, std::max(by_count, by_floor)));
  std::vector<ResidentPiece> pieces;
  uint64_t row = 0;
  for (std::size_t i = 0; i < links.size(); ++i) {
    for (uint64_t begin = row, end = row + rows[i]; begin < end;) {
      const uint64_t cut = std::min(end, (begin / block_rows + 1) * block_rows);
      pieces.push_back({links[i], begin, static_cast<uint32_t>(cut - begin)});
      begin = cut;
    }
    row += rows[i];
  }
  return place_pieces(cluster, a, pieces, block_rows, options, first_tile_id);
}

std::vector<ResidentPiece> layout_of(const ResidentMatrix& placed) {
  std::vector<ResidentPiece> pieces;
  for (const ResidentShare& share : placed.shares) {
    for (const ResidentBlock& block : share.blocks) pieces.push_back({share.link, block.row_begin, block.rows});
  }
  std::sort(pieces.begin(), pieces.end(), [](const auto& x, const auto& y) { return x.row_begin < y.row_begin; });
  return pieces;
}

Result<ResidentMatrix> place_pieces(cluster::ClusterConnection& cluster, linalg::MatrixView a,
                                    std::span<const ResidentPiece> pieces, uint64_t block_rows,
                                    const ResidentOptions& options, uint32_t first_tile_id) {
  if (a.rows == 0 || a.cols == 0 || a.cols > (1u << 20)) {
    return invalid_argument(fmt::format("a {}x{} matrix cannot be placed", a.rows, a.cols));
  }
  const uint64_t row_bytes = a.cols * sizeof(double);
  // Every row once: the pieces in row order follow each other from row 0 to the last.
  std::vector<ResidentPiece> ordered(pieces.begin(), pieces.end());
  std::sort(ordered.begin(), ordered.end(), [](const auto& x, const auto& y) { return x.row_begin < y.row_begin; });
  uint64_t next_row = 0;
  for (const ResidentPiece& piece : ordered) {
    if (piece.row_begin != next_row || piece.rows == 0 || piece.rows * row_bytes > std::max(options.largest_tile_bytes, row_bytes)) {
      return invalid_argument(fmt::format("the pieces do not cover the matrix's rows once (a piece of {} rows at row {}, "
                                          "row {} expected)",
                                          piece.rows, piece.row_begin, next_row));
    }
    if (piece.link >= cluster.links().size()) return invalid_argument("place_pieces: a node index beyond the cluster");
    next_row += piece.rows;
  }
  if (next_row != a.rows) {
    return invalid_argument(fmt::format("the shares hold {} rows, the matrix {}", next_row, a.rows));
  }
  ResidentMatrix placed;
  placed.rows = a.rows;
  placed.cols = a.cols;
  placed.block_rows = block_rows;
  uint32_t next_id = first_tile_id;
  // One share per node, in the order the nodes first appear in `pieces` (place_rows: its links').
  for (const ResidentPiece& first : pieces) {
    if (std::any_of(placed.shares.begin(), placed.shares.end(), [&](const ResidentShare& s) { return s.link == first.link; })) {
      continue;
    }
    ResidentShare share;
    share.link = first.link;
    for (const ResidentPiece& piece : ordered) {
      if (piece.link != first.link) continue;
      share.blocks.push_back({next_id++, piece.row_begin, piece.rows});
      share.rows += piece.rows;
    }
    placed.shares.push_back(std::move(share));
  }
  placed.next_tile_id = next_id;

  // The check's matrix side, one pass over A: s = r^T A and |r|^T |A|, taken on a thread of its
  // own while the nodes are sent (or load) their pieces, which read A too but wait on the network
  // and on the workers. Its memory is reserved here, so the thread cannot fail.
  std::mt19937_64 random(options.seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  placed.check_vector.resize(a.rows);
  for (double& v : placed.check_vector) v = uniform(random);
  placed.check_row.assign(a.cols, 0.0);
  placed.check_magnitude.assign(a.cols, 0.0);
  std::thread check([&placed, a] {
    for (uint64_t r = 0; r < a.rows; ++r) {
      const double weight = placed.check_vector[r];
      const double* values = a.row(r);
      for (uint64_t c = 0; c < a.cols; ++c) {
        placed.check_row[c] += weight * values[c];
        placed.check_magnitude[c] += std::abs(weight) * std::abs(values[c]);
      }
    }
  });

  std::vector<PieceTraffic> traffic(placed.shares.size());
  Status stored = on_share_nodes(cluster, placed.shares, options.node_timeout_s,
                                 [&](std::size_t i, tp::FrameConnection& connection) {
                                   const bool use_store = uses_block_store(cluster.links()[placed.shares[i].link], options);
                                   return store_pieces(connection, use_store, a, placed.shares[i].blocks, traffic[i]);
                                 });
  check.join();
  if (!stored) {
    release_resident(cluster, placed);
    return stored;
  }
  for (const PieceTraffic& node : traffic) {
    placed.bytes_placed += node.sent;
    placed.bytes_reused += node.reused;
  }
  return placed;
}

Result<uint64_t> rebalance_rows(cluster::ClusterConnection& cluster, linalg::MatrixView a, ResidentMatrix& placed,
                                std::span<const std::size_t> links, std::span<const uint64_t> rows,
                                const ResidentOptions& options) {
  if (links.size() != rows.size()) return invalid_argument("rebalance_rows: one row count per node");
  if (a.rows != placed.rows || a.cols != placed.cols) {
    return invalid_argument(fmt::format("rebalance_rows: the matrix is {}x{}, the placed one {}x{}", a.rows, a.cols,
                                        placed.rows, placed.cols));
  }
  if (std::accumulate(rows.begin(), rows.end(), uint64_t{0}) != placed.rows) {
    return invalid_argument(fmt::format("the shares hold {} rows, the matrix {}",
                                        std::accumulate(rows.begin(), rows.end(), uint64_t{0}), placed.rows));
  }
  // Every node of `links` with its share (existing or empty) and its target.
  std::vector<ResidentShare> shares(links.size());
  std::vector<int64_t> target(links.size());
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (links[i] >= cluster.links().size()) return invalid_argument("rebalance_rows: a node index beyond the cluster");
    shares[i].link = links[i];
    target[i] = static_cast<int64_t>(rows[i]);
  }
  for (ResidentShare& share : placed.shares) {
    const auto at = std::find(links.begin(), links.end(), share.link);
    if (at == links.end()) return invalid_argument("rebalance_rows: a node holding rows has no target");
    shares[static_cast<std::size_t>(at - links.begin())] = share;
  }
  // Pieces leave a node above its target from its end while that brings it nearer.
  std::vector<std::pair<ResidentBlock, std::size_t>> moving;  // (piece, the node giving it)
  std::vector<std::vector<ResidentBlock>> released(links.size());
  for (std::size_t i = 0; i < shares.size(); ++i) {
    ResidentShare& share = shares[i];
    while (!share.blocks.empty()) {
      const int64_t held = static_cast<int64_t>(share.rows);
      const int64_t piece = share.blocks.back().rows;
      if (std::abs(held - piece - target[i]) >= std::abs(held - target[i])) break;
      moving.emplace_back(share.blocks.back(), i);
      share.blocks.pop_back();
      share.rows -= static_cast<uint64_t>(piece);
    }
  }
  // ... and each, largest first, goes to the node furthest below its target under its own id:
  // ids are unique among the matrix's pieces, so the receiver holds no other piece by that id.
  std::stable_sort(moving.begin(), moving.end(), [](const auto& x, const auto& y) { return x.first.rows > y.first.rows; });
  std::vector<std::vector<ResidentBlock>> received(links.size());
  for (const auto& [piece, giver] : moving) {
    std::size_t furthest = 0;
    for (std::size_t i = 1; i < shares.size(); ++i) {
      if (target[i] - static_cast<int64_t>(shares[i].rows) > target[furthest] - static_cast<int64_t>(shares[furthest].rows)) {
        furthest = i;
      }
    }
    // A giver that ends up furthest below keeps its piece: nothing travels, nothing is released.
    if (furthest != giver) {
      received[furthest].push_back(piece);
      released[giver].push_back(piece);
    }
    shares[furthest].blocks.push_back(piece);
    shares[furthest].rows += piece.rows;
  }
  std::vector<ResidentShare> gaining;
  std::vector<std::size_t> gaining_index;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (received[i].empty()) continue;
    gaining.push_back(shares[i]);
    gaining_index.push_back(i);
  }
  std::vector<PieceTraffic> traffic(gaining.size());
  Status stored = on_share_nodes(cluster, gaining, options.node_timeout_s, [&](std::size_t g, tp::FrameConnection& connection) {
    const bool use_store = uses_block_store(cluster.links()[gaining[g].link], options);
    return store_pieces(connection, use_store, a, received[gaining_index[g]], traffic[g]);
  });
  if (!stored) {
    for (std::size_t g = 0; g < gaining.size(); ++g) {
      cluster::NodeLink& link = cluster.links()[gaining[g].link];
      if (!link.connection) continue;
      std::vector<uint32_t> ids;
      for (const ResidentBlock& piece : received[gaining_index[g]]) ids.push_back(piece.tile_id);
      (void)gemm::GemmClient(*link.connection).release(ids);
    }
    return stored;
  }
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (released[i].empty()) continue;
    std::vector<uint32_t> ids;
    for (const ResidentBlock& piece : released[i]) ids.push_back(piece.tile_id);
    cluster::NodeLink& link = cluster.links()[shares[i].link];
    if (link.connection) (void)gemm::GemmClient(*link.connection).release(ids);
  }
  placed.shares.clear();
  for (ResidentShare& share : shares) {
    if (share.blocks.empty()) continue;
    std::sort(share.blocks.begin(), share.blocks.end(),
              [](const ResidentBlock& x, const ResidentBlock& y) { return x.row_begin < y.row_begin; });
    placed.shares.push_back(std::move(share));
  }
  uint64_t moved_bytes = 0;
  for (const PieceTraffic& node : traffic) {
    moved_bytes += node.sent;
    placed.bytes_reused += node.reused;
  }
  placed.bytes_placed += moved_bytes;
  return moved_bytes;
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
    run.node = cluster.links()[share.link].spec.name;
    run.rows = share.rows;
    const uint64_t sent_before = connection.bytes_sent();
    const uint64_t received_before = connection.bytes_received();
    gemm::GemmClient client(connection);
    TESSERA_RETURN_IF_ERROR(client.store(x_id, k, n, x_rows, x_crc));
    const std::vector<ResidentBlock>& pieces = share.blocks;
    for (std::size_t t = 0; t < pieces.size(); ++t) {
      gemm::Job job;
      job.job_id = t + 1;
      job.flags = gemm::kJobCreateOutput | gemm::kJobSendResult;
      if (t + 1 == pieces.size()) job.flags |= gemm::kJobReleaseB;
      job.a_tile = pieces[t].tile_id;
      job.b_tile = x_id;
      job.c_tile = first_output_id + static_cast<uint32_t>(t);
      job.m = pieces[t].rows;
      job.n = n;
      job.k = k;
      job.c_rows = job.m;
      job.c_cols = n;
      TESSERA_RETURN_IF_ERROR(client.job(job));
    }
    // One CREDIT and one RESULT per job; each result lands in Y's rows of its piece.
    std::vector<double> landing;
    std::vector<uint32_t> outputs;
    for (std::size_t replies = 0; replies < 2 * pieces.size(); ++replies) {
      Result<gemm::GemmClient::Reply> reply = client.next({tp::MessageType::kCredit, tp::MessageType::kResult});
      if (!reply) return reply.status();
      if (const auto* credit = std::get_if<gemm::Credit>(&*reply)) {
        run.compute_s += credit->compute_seconds;
        continue;
      }
      const auto& result = std::get<gemm::GemmClient::ResultHeader>(*reply);
      const uint64_t t = result.tile.tile_id - first_output_id;
      if (t >= pieces.size() || result.tile.rows != pieces[t].rows || result.tile.cols != n) {
        return protocol_error(fmt::format("a RESULT for tile {} ({}x{}) that no job asked for", result.tile.tile_id,
                                          result.tile.rows, result.tile.cols));
      }
      landing.resize(uint64_t{result.tile.rows} * n);
      TESSERA_RETURN_IF_ERROR(client.read_result(result, landing));
      for (uint32_t r = 0; r < result.tile.rows; ++r) {
        std::copy_n(landing.data() + uint64_t{r} * n, n, y.row(pieces[t].row_begin + r));
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

std::vector<std::string> lost_nodes(const cluster::ClusterConnection& cluster, const ResidentMatrix& a) {
  std::vector<std::string> lost;
  for (const ResidentShare& share : a.shares) {
    const cluster::NodeLink& link = cluster.links()[share.link];
    if (!link.connection) lost.push_back(link.spec.name);
  }
  return lost;
}

Result<uint64_t> replace_lost_rows(cluster::ClusterConnection& cluster, linalg::MatrixView source, ResidentMatrix& a) {
  std::vector<std::size_t> links;
  std::vector<uint64_t> rows;
  uint64_t surviving = 0;
  for (const ResidentShare& share : a.shares) {
    links.push_back(share.link);
    const bool alive = cluster.links()[share.link].connection != nullptr;
    rows.push_back(alive ? share.rows : 0);
    surviving += alive ? share.rows : 0;
  }
  if (surviving == 0) return network_error("every node holding the matrix's rows was lost");
  // The lost rows go to the survivors in proportion to what each holds: the shares stay balanced
  // as they were measured.
  uint64_t given = 0;
  std::size_t largest = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<uint64_t>(static_cast<double>(rows[i]) * static_cast<double>(a.rows) / static_cast<double>(surviving));
    given += rows[i];
    if (rows[i] > rows[largest]) largest = i;
  }
  rows[largest] += a.rows - given;  // the floors' remainder
  return rebalance_rows(cluster, source, a, links, rows);
}

Result<ResidentProduct> multiply_resident_surviving(cluster::ClusterConnection& cluster, linalg::MatrixView source,
                                                    ResidentMatrix& a, linalg::MatrixView x, linalg::MutableMatrixView y,
                                                    const std::function<void(const std::string&)>& on_lost,
                                                    const ResidentOptions& options) {
  for (;;) {
    Result<ResidentProduct> product = multiply_resident(cluster, a, x, y, options);
    std::vector<std::string> lost = lost_nodes(cluster, a);
    if (product || lost.empty()) return product;
    for (std::string& name : lost) name = "'" + name + "'";
    const uint64_t before = a.bytes_placed;
    Result<uint64_t> moved = replace_lost_rows(cluster, source, a);
    if (!moved) {
      return product.status().with_context(
          fmt::format("{}; placing its rows again failed ({}): ", fmt::join(lost, ", "), moved.status().message()));
    }
    if (on_lost) {
      on_lost(fmt::format("node{} {} lost during a resident product ({}); {:.1f} MB of rows placed again on the "
                          "others, the product runs again",
                          lost.size() == 1 ? "" : "s", fmt::join(lost, ", "), product.status().message(),
                          static_cast<double>(a.bytes_placed - before) / 1e6));
    }
    // rebalance_rows left the lost nodes no piece, so no share: the loop runs on the others.
  }
}

void release_resident(cluster::ClusterConnection& cluster, const ResidentMatrix& a) {
  for (const ResidentShare& share : a.shares) {
    cluster::NodeLink& link = cluster.links()[share.link];
    if (!link.connection) continue;
    std::vector<uint32_t> ids;
    for (const ResidentBlock& piece : share.blocks) ids.push_back(piece.tile_id);
    gemm::GemmClient client(*link.connection);
    (void)client.release(ids);
  }
}

}  // namespace tessera::balance::multiply
