// A matrix whose row blocks stay on the workers between products: placed once (STOREd into each
// node's tile store under ids of a range no other run uses, or loaded there from the node's block
// store when an earlier session kept the same piece: pieces are named by their content,
// transport/block_key.hpp), then multiplied by a thin operand X
// as often as the caller likes, each product shipping only X out and the nodes' rows of A X back.
// The row blocks live as long as the connections' sessions do; release() frees them.
//
// Each product is checked on the coordinator at a cost independent of A: at placement the
// coordinator draws a random vector r and keeps s = r^T A and |r|^T |A| (one pass over A, once),
// and a product Y is accepted when r^T Y agrees with s X within the rounding bound that
// |r|^T |A| |X| gives (Freivalds' check, its matrix side precomputed). A wrong row block on a node
// (or a wrong answer from one) fails the check but for a chance of the order of the rounding
// bound's tolerance; the check costs (m + k) n per product, not m k n.
//
// Ownership: the caller owns the connection, A (read during place_rows only), X and Y. Not
// reentrant on one connection: one product at a time; the nodes work in parallel inside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/core/status.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::multiply {

// Tile ids at and above this are resident blocks'; the multiply and the DAG runner number theirs
// from 0 within a run, far below.
inline constexpr uint32_t kFirstResidentTileId = 0xA0000000u;

// A piece of A's rows held by one node as one tile. Pieces are cut on a grid of
// ResidentMatrix::block_rows rows (and where one node's rows end), so that moving work between
// nodes moves whole pieces and leaves the rest where it is.
struct ResidentBlock {
  uint32_t tile_id = 0;
  uint64_t row_begin = 0;
  uint32_t rows = 0;
};

// One node's rows of A, as it holds them: pieces in row order, not necessarily consecutive once
// the shares were balanced (rebalance_rows).
struct ResidentShare {
  std::size_t link = 0;  // index in cluster.links()
  uint64_t rows = 0;     // the pieces' rows, summed
  std::vector<ResidentBlock> blocks;
};

struct ResidentMatrix {
  uint64_t rows = 0;
  uint64_t cols = 0;
  uint64_t block_rows = 0;            // the grid pieces are cut on
  std::vector<ResidentShare> shares;  // nodes with rows
  // The check's matrix side: r (rows), s = r^T A and |r|^T |A| (cols each).
  std::vector<double> check_vector;
  std::vector<double> check_row;
  std::vector<double> check_magnitude;
  uint64_t bytes_placed = 0;  // tile data sent at placement and by every rebalance since
  uint64_t bytes_reused = 0;  // ... and not sent, because a node's block store had the piece
  uint32_t next_tile_id = 0;  // the first id past the pieces' (a move keeps a piece's id)
};

struct ResidentOptions {
  uint64_t seed = 1;            // the check vector's
  double node_timeout_s = 60.0; // a node that sends nothing for this long while it owes frames is lost
  uint64_t largest_tile_bytes = uint64_t{32} << 20;  // pieces are cut to at most this
  uint64_t grid_pieces = 128;  // ... and to about rows / grid_pieces rows, so shares can move finely
  // Pieces go through the block store of a node that has one (kCapabilityBlockStore): those it
  // holds from an earlier session are loaded there rather than sent, the rest sent to be kept.
  bool use_block_stores = true;
};

// What one node costs a resident product, from its profile: its rate for the product's shape,
// and its link both ways.
struct ResidentNodeCost {
  std::string name;
  double flops_per_s = 0.0;            // 0: the node takes no rows
  double to_node_bytes_per_s = 0.0;    // 0: unusable
  double from_node_bytes_per_s = 0.0;
  double latency_s = 0.0;              // one way
  // > 0: the seconds a row was measured to cost this node in products of this shape (compute and
  // its result's way back, from the node's finish in products run all at once), in place of the
  // rate and the return link above.
  double measured_row_s = 0.0;
};

struct ResidentShares {
  std::vector<uint64_t> rows;           // per node, in the order given; summing to m
  std::vector<std::string> left_out;    // a sentence per node given no rows, and why
  double forecast_s = 0.0;              // the product's forecast makespan with these rows
};

// Rows of an m x k matrix for products by k x n operands, so that every node taking part is
// forecast to finish together: a node i costs fixed_i = 2 latency_i + k n 8 / to_i (X must reach
// it whatever its share) plus per_row_i = 2 k n / flops_i + n 8 / from_i for each row, and the
// common finish T solves sum_i max(0, (T - fixed_i) / per_row_i) = m (water-filling). A node whose
// fixed cost alone is past T gets no rows, and the sentence says so: including it could only make
// the product later. Pure; REQUIRES: some node with a rate and links.
ResidentShares resident_rows(uint64_t m, uint64_t k, uint64_t n, std::span<const ResidentNodeCost> nodes);

// Places `a` on the nodes: rows[i] consecutive rows to link links[i] (in that order, rows summing
// to a.rows; a node with 0 rows holds nothing), cut into pieces on the grid, tile ids from
// `first_tile_id` on. Waits until
// every node has filed its tiles (a STATS round trip), so a node out of tile memory fails here,
// named. On failure nothing placed is left behind where the connection still stands.
Result<ResidentMatrix> place_rows(cluster::ClusterConnection& cluster, linalg::MatrixView a,
                                  std::span<const std::size_t> links, std::span<const uint64_t> rows,
                                  const ResidentOptions& options = {}, uint32_t first_tile_id = kFirstResidentTileId);

// One piece of a layout: `rows` rows from `row_begin` on, held by node `link`.
struct ResidentPiece {
  std::size_t link = 0;
  uint64_t row_begin = 0;
  uint32_t rows = 0;
  bool operator==(const ResidentPiece&) const = default;
};

// The pieces of `placed`, in row order: what a later placement of the same matrix can ask for
// again (place_pieces), so that every piece is one a node's block store kept.
std::vector<ResidentPiece> layout_of(const ResidentMatrix& placed);

// Places `a` in exactly these pieces (covering every row once, each at most
// options.largest_tile_bytes), on the grid `block_rows` they were cut on; otherwise as
// place_rows, which cuts its pieces and calls this. kInvalidArgument when the pieces do not cover
// the rows exactly or name a node beyond the cluster.
Result<ResidentMatrix> place_pieces(cluster::ClusterConnection& cluster, linalg::MatrixView a,
                                    std::span<const ResidentPiece> pieces, uint64_t block_rows,
                                    const ResidentOptions& options = {}, uint32_t first_tile_id = kFirstResidentTileId);

// Moves whole pieces of `placed` between nodes so that node links[i] holds about rows[i] rows
// (rows summing to a.rows): a node above its target gives pieces from its end while that brings
// it nearer, and each goes to the node furthest below its own; `a` is the matrix placed, read for
// the pieces that move (a gaining node with the piece in its block store loads it instead). A
// gaining node files its new pieces (a STATS round trip) before a losing node releases them, so a
// failure leaves every row held where it was. Returns the bytes sent.
Result<uint64_t> rebalance_rows(cluster::ClusterConnection& cluster, linalg::MatrixView a, ResidentMatrix& placed,
                                std::span<const std::size_t> links, std::span<const uint64_t> rows,
                                const ResidentOptions& options = {});

struct ResidentNodeRun {
  std::size_t link = 0;
  std::string node;
  uint64_t rows = 0;
  uint64_t bytes_to_node = 0;
  uint64_t bytes_from_node = 0;
  double compute_s = 0.0;  // the worker's compute time for its jobs
  double finish_s = 0.0;   // its last result in, from the start of the product
};

struct ResidentProduct {
  double seconds = 0.0;              // X out to the last row of Y in
  double verification_seconds = 0.0;
  Verification verification;
  std::vector<ResidentNodeRun> nodes;
};

// Y = A X on the nodes holding A: X (a.cols x n, n >= 1) stored on each, one job per row block,
// the results read into Y's rows (Y: a.rows x n). Fails naming a node that errs, closes or stays
// silent past options.node_timeout_s; a product that fails the check is returned with
// verification.passed false (the caller refuses it).
Result<ResidentProduct> multiply_resident(cluster::ClusterConnection& cluster, const ResidentMatrix& a,
                                          linalg::MatrixView x, linalg::MutableMatrixView y,
                                          const ResidentOptions& options = {});

// Shares measured rather than forecast. The profile's rates are taken from short probes, and a
// capped node (a cgroup quota, a board that throttles) runs a long product at a rate they do not
// show; so the placed matrix is multiplied by random operands of `columns` columns
// (`products_per_round` at a time, every node at once, as the real products will run), each
// node's cost per row taken from its median finish net of its fixed cost, and the shares moved
// (rebalance_rows) to where resident_rows puts them with those costs, while the forecast gain is
// worth it (5%, and repaid within the expected products), up to `rounds` times. The shares left
// are the last measured, or an earlier round's when those were clearly (10%) faster. costs[i] is the
// cost of node links[i], as resident_rows takes it (nodes without rows keep their forecast cost).
struct BalanceRound {
  std::vector<uint64_t> rows;  // per node of `links`, during this round's products
  double measured_s = 0.0;     // the products' median makespan
  double forecast_s = 0.0;     // what the shares measured here were forecast to take (0: the first)
  uint64_t bytes_moved = 0;    // to reach these shares
};

struct ResidentBalance {
  std::vector<BalanceRound> rounds;
  std::size_t kept_round = 0;          // the round whose shares the placement is left with
  std::vector<double> measured_row_s;  // per node of `links`, from the last round it held rows in
  std::vector<std::string> left_out;   // a sentence per node that held rows and gave them all back
  uint64_t bytes_moved = 0;
  double seconds = 0.0;
};

struct BalanceOptions {
  uint64_t columns = 1;
  int products_per_round = 3;
  int rounds = 3;
  double worth_moving = 0.05;  // a forecast gain below this fraction of the measured time is not
  // The products the placement is expected to serve: a move is made only when the time it saves
  // over them outweighs the time its rows take to reach the gaining nodes (their links' rates).
  uint64_t expected_products = 100;
  uint64_t seed = 7;
};

Result<ResidentBalance> balance_resident(cluster::ClusterConnection& cluster, linalg::MatrixView a,
                                         ResidentMatrix& placed, std::span<const std::size_t> links,
                                         std::vector<ResidentNodeCost> costs, const BalanceOptions& balance,
                                         const ResidentOptions& options = {});

// The nodes holding rows of `a` whose connection was dropped (a product failed on them), by name.
std::vector<std::string> lost_nodes(const cluster::ClusterConnection& cluster, const ResidentMatrix& a);

// Places the rows of the nodes lost (lost_nodes) again on the nodes still connected, from `source`
// (the matrix placed, kept unchanged by the caller), in proportion to what each holds; returns
// the bytes moved. Fails when no node holding rows is left.
Result<uint64_t> replace_lost_rows(cluster::ClusterConnection& cluster, linalg::MatrixView source, ResidentMatrix& a);

// multiply_resident that survives lost nodes: when nodes fail the product (killed, silent past
// the deadline, an ERROR), their rows are placed again on the others from `source`, `on_lost`
// (may be empty) hears a sentence saying so, and the product runs again; the result is exact or
// the call fails (every node lost, or placing again failed). A product that fails its check is
// returned as multiply_resident returns it.
Result<ResidentProduct> multiply_resident_surviving(cluster::ClusterConnection& cluster, linalg::MatrixView source,
                                                    ResidentMatrix& a, linalg::MatrixView x, linalg::MutableMatrixView y,
                                                    const std::function<void(const std::string&)>& on_lost,
                                                    const ResidentOptions& options = {});

// Drops the row blocks from the nodes still connected (RELEASE; nothing waits for an answer).
void release_resident(cluster::ClusterConnection& cluster, const ResidentMatrix& a);

}  // namespace tessera::balance::multiply
