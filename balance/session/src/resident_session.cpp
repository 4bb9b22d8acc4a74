// The Session's matrices kept on the nodes: placing one (sized by the profile, measured and moved,
// or as an earlier session measured it), products and iterations over it with a lost node's rows
// placed again from the caller's copy, and freeing it. The rest of the Session is in session.cpp.
#include "tessera/balance/session/session.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/partition/row_partition.hpp"
#include "resident_memory.hpp"
#include "session_state.hpp"

namespace tessera::balance::session {

namespace {

// Node name -> the rows it holds of `matrix`, for every node of the session in cluster order.
std::vector<std::pair<std::string, uint64_t>> rows_per_node(const std::vector<cluster::NodeLink>& all,
                                                            const multiply::ResidentMatrix& matrix) {
  std::vector<std::pair<std::string, uint64_t>> rows;
  for (std::size_t i = 0; i < all.size(); ++i) {
    uint64_t held = 0;
    for (const multiply::ResidentShare& share : matrix.shares) {
      if (share.link == i) held = share.rows;
    }
    rows.emplace_back(all[i].spec.name, held);
  }
  return rows;
}

}  // namespace

Result<ResidentPlacement> Session::place_rows(linalg::MatrixView a, const PlacementOptions& options,
                                              const RunControl& control) {
  if (cancel_requested(control)) return cancelled("cancelled before the matrix was placed");
  if (options.columns == 0) return invalid_argument("a resident matrix is placed for operands of at least one column");
  const auto start = std::chrono::steady_clock::now();
  std::vector<cluster::NodeLink>& all = state_->connection.links();
  std::vector<std::size_t> links;
  for (const std::string& name : options.nodes) {
    const auto found = std::find_if(all.begin(), all.end(), [&](const cluster::NodeLink& l) { return l.spec.name == name; });
    if (found == all.end()) {
      std::vector<std::string> names;
      for (const cluster::NodeLink& link : all) names.push_back(link.spec.name);
      return invalid_argument(fmt::format("no node '{}' in this session (its nodes: {})", name, fmt::join(names, ", ")));
    }
    if (!found->connection) return network_error(fmt::format("node '{}' is not connected in this session", name));
    links.push_back(static_cast<std::size_t>(found - all.begin()));
  }
  if (options.nodes.empty()) {
    for (std::size_t i = 0; i < all.size(); ++i) links.push_back(i);
  }
  std::vector<uint64_t> rows(links.size());
  ResidentPlacement placement;
  std::vector<multiply::ResidentNodeCost> costs(links.size());
  bool sized = false;
  if (state_->profile && options.split == PlacementOptions::Split::kBalanced) {
    // Each node's rate for this shape: a product by few columns reads A once, so it runs at the
    // node's vector rate times the columns, up to its GEMM rate.
    for (std::size_t i = 0; i < links.size(); ++i) {
      multiply::ResidentNodeCost& cost = costs[i];
      cost.name = all[links[i]].spec.name;
      if (const profile::NodeProfile* node = state_->profile->find(cost.name); node != nullptr && node->has_link) {
        const double gemm = node->gflops * 1e9;
        cost.flops_per_s = node->vector_gflops > 0.0
                               ? std::min(gemm, node->vector_gflops * 1e9 * static_cast<double>(options.columns))
                               : gemm;
        cost.to_node_bytes_per_s = node->link.to_node_bytes_per_s;
        cost.from_node_bytes_per_s = node->link.from_node_bytes_per_s;
        cost.latency_s = node->link.latency_s;
      }
    }
    const multiply::ResidentShares shares = multiply::resident_rows(a.rows, a.cols, options.columns, costs);
    if (std::accumulate(shares.rows.begin(), shares.rows.end(), uint64_t{0}) == a.rows) {
      rows = shares.rows;
      placement.forecast_product_s = shares.forecast_s;
      placement.warnings = shares.left_out;
      sized = true;
    }
  }
  if (!sized) {
    const std::vector<partition::RowBlock> blocks = partition::even_rows(a.rows, links.size());
    for (std::size_t i = 0; i < links.size(); ++i) rows[i] = blocks[i].count;
  }
  if (a.rows > UINT32_MAX - state_->next_resident_tile) {  // at most a piece per row, moves included twice
    return resource_exhausted("this session has placed as many resident blocks as it can number; open another");
  }
  multiply::ResidentOptions resident;
  resident.use_block_stores = options.use_block_stores;
  // Shares an earlier session measured for this matrix, on these nodes, for operands this wide:
  // placed as they were (each piece one the nodes' block stores kept), and not measured again.
  const bool measuring = sized && options.measure && links.size() > 1;
  std::string memory_path;
  std::vector<std::string> node_names;
  for (std::size_t link : links) node_names.push_back(all[link].spec.name);
  if (measuring && !options.memory_dir.empty()) {
    memory_path = resident_memory_path(options.memory_dir, state_->cluster.name, matrix_fingerprint(a), options.columns,
                                       node_names);
  }
  std::optional<Result<multiply::ResidentMatrix>> remembered;
  if (const std::optional<ResidentMemory> memory =
          read_resident_memory(memory_path, a.rows, a.cols, options.columns, node_names)) {
    std::vector<multiply::ResidentPiece> pieces;
    for (const RememberedPiece& piece : memory->pieces) {
      const auto at = std::find(node_names.begin(), node_names.end(), piece.node);
      pieces.push_back({links[static_cast<std::size_t>(at - node_names.begin())], piece.row_begin, piece.rows});
    }
    Result<multiply::ResidentMatrix> again =
        multiply::place_pieces(state_->connection, a, pieces, memory->block_rows, resident, state_->next_resident_tile);
    // A memory that does not fit this placement's bounds is no memory; any other failure is the call's.
    if (again || again.status().code() != StatusCode::kInvalidArgument) remembered = std::move(again);
    if (again) {
      placement.remembered = true;
      placement.measured_product_s = memory->measured_product_s;
    }
  }
  Result<multiply::ResidentMatrix> placed =
      remembered ? std::move(*remembered)
                 : multiply::place_rows(state_->connection, a, links, rows, resident, state_->next_resident_tile);
  if (!placed) return placed.status();
  state_->next_resident_tile = placed->next_tile_id;
  if (measuring && !placement.remembered) {
    multiply::BalanceOptions balance;
    balance.columns = options.columns;
    balance.expected_products = options.expected_products;
    Result<multiply::ResidentBalance> balanced =
        multiply::balance_resident(state_->connection, a, *placed, links, costs, balance, resident);
    if (!balanced) {
      multiply::release_resident(state_->connection, *placed);
      return balanced.status();
    }
    placement.first_measured_product_s = balanced->rounds.front().measured_s;
    placement.measured_product_s = balanced->rounds[balanced->kept_round].measured_s;
    placement.measuring_rounds = static_cast<int>(balanced->rounds.size());
    placement.bytes_moved = balanced->bytes_moved;
    placement.warnings.insert(placement.warnings.end(), balanced->left_out.begin(), balanced->left_out.end());
    ResidentMemory memory{node_names, a.rows, a.cols, options.columns, placed->block_rows, {}, placement.measured_product_s};
    for (const multiply::ResidentPiece& piece : multiply::layout_of(*placed)) {
      memory.pieces.push_back({all[piece.link].spec.name, piece.row_begin, piece.rows});
    }
    // A memory that cannot be written costs the next session its measuring only: said, not failed.
    if (const Status saved = write_resident_memory(memory_path, memory); !saved) {
      placement.warnings.push_back("the measured shares were not remembered for the next session: " + saved.message());
    }
  }
  placement.id = state_->next_resident_id++;
  placement.rows_per_node = rows_per_node(all, *placed);
  placement.bytes_placed = placed->bytes_placed;
  placement.bytes_reused = placed->bytes_reused;
  state_->resident.emplace(placement.id, ResidentEntry{std::move(*placed), a});
  placement.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return placement;
}

Result<Session::ResidentEntry*> Session::resident_entry(uint64_t id) {
  const auto found = state_->resident.find(id);
  if (found == state_->resident.end()) {
    return not_found(fmt::format("no resident matrix {} in this session (it ended, or the matrix was freed)", id));
  }
  return &found->second;
}

namespace {

// A lost node's rows placed again on the others, heard as a notice.
multiply::ResidentSurvival survival_of(linalg::MatrixView source, const RunControl& control) {
  return {source, [&control](const std::string& notice) {
            if (control.on_notice) control.on_notice(notice);
          }};
}

}  // namespace

Result<multiply::ResidentProduct> Session::multiply_resident(uint64_t id, linalg::MatrixView x,
                                                             linalg::MutableMatrixView y, const RunControl& control) {
  if (cancel_requested(control)) return cancelled("cancelled before the product started");
  Result<ResidentEntry*> entry = resident_entry(id);
  if (!entry) return entry.status();
  CancelWatcher watcher(control.cancel, state_->connection);
  const multiply::ResidentSurvival survival = survival_of((*entry)->source, control);
  return multiply::multiply_resident_surviving(state_->connection, (*entry)->source, (*entry)->matrix, x, y,
                                               survival.on_lost);
}

Result<multiply::IterationOutcome> Session::power_iteration(uint64_t id, const multiply::PowerOptions& options,
                                                            const RunControl& control) {
  Result<ResidentEntry*> entry = resident_entry(id);
  if (!entry) return entry.status();
  CancelWatcher watcher(control.cancel, state_->connection);
  const multiply::ResidentSurvival survival = survival_of((*entry)->source, control);
  return multiply::power_iteration(state_->connection, (*entry)->matrix, options, control.cancel, &survival);
}

Result<multiply::IterationOutcome> Session::conjugate_gradient(uint64_t id, std::span<const double> b,
                                                               const multiply::CgOptions& options,
                                                               const RunControl& control) {
  Result<ResidentEntry*> entry = resident_entry(id);
  if (!entry) return entry.status();
  CancelWatcher watcher(control.cancel, state_->connection);
  const multiply::ResidentSurvival survival = survival_of((*entry)->source, control);
  return multiply::conjugate_gradient(state_->connection, (*entry)->matrix, b, options, control.cancel, &survival);
}

std::vector<std::pair<std::string, uint64_t>> Session::resident_rows_per_node(uint64_t id) const {
  const auto found = state_->resident.find(id);
  if (found == state_->resident.end()) return {};
  return rows_per_node(state_->connection.links(), found->second.matrix);
}

void Session::release_resident(uint64_t id) {
  const auto found = state_->resident.find(id);
  if (found == state_->resident.end()) return;
  multiply::release_resident(state_->connection, found->second.matrix);
  state_->resident.erase(found);
}

}  // namespace tessera::balance::session
