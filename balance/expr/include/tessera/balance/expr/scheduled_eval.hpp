// A matrix expression evaluated as a scheduled task DAG on the workers (Session::evaluate's
// scheduled mode): the expression lowered to tile tasks for each candidate tile size (transposes
// read through, see schedule.hpp), placed by HEFT with the nodes' tile caches, the fastest
// predicted schedule run (dag_run.hpp), rescheduled on the survivors when a node is lost, and the
// value checked on the coordinator (verify_expression.hpp).
// Prints nothing; notices go to ScheduledEvalOptions::on_notice. Not thread-safe: it drives the
// caller's connections for the length of the call.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/expr/eval_report.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/core/status.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::expr {

// How a tile moves from the node that computed it to another: worker to worker (kDirect; needs
// every node's worker to send tiles, transport::kCapabilityTileSend), through the coordinator
// (kCoordinator), or whichever the schedule forecasts sooner (kAuto; direct on a tie, since it
// spares the coordinator's link).
enum class TileRoute { kAuto, kDirect, kCoordinator };
std::string_view tile_route_name(TileRoute route);
Result<TileRoute> parse_tile_route(std::string_view name);  // auto | direct | coordinator

struct ScheduledEvalOptions {
  uint64_t tile = 0;          // the tile size; 0 chooses among candidates by simulation
  double cache_bytes = 0.0;   // each node's tile cache in bytes; 0: half the tile memory its worker offers
  // Only these nodes take part (e.g. the fastest alone); empty: every node.
  std::vector<std::string> only_nodes;
  // Every node taking part gets tasks. false: the fastest node alone, the fastest two, ... are
  // scheduled too, and fewer nodes run when they are forecast clearly faster (where moving tiles
  // to slow nodes costs more than their help).
  bool every_node = false;
  TileRoute tile_route = TileRoute::kAuto;
  double node_timeout_s = 0.0;  // > 0: every node's silence deadline; 0: from its profiled rates
  multiply::VerifyMode verify = multiply::VerifyMode::kFreivalds;
  uint64_t verify_seed = 1;
  // How each node's worker reaches each other node's (hosts[from][to], cluster order; empty: at
  // the nodes' own hosts).
  std::vector<std::vector<std::string>> peer_hosts;
  // Set (from any thread) to stop between schedules: the call fails with kCancelled. Stopping a
  // schedule already running is the caller's: it shuts the connections down.
  const std::atomic<bool>* cancel = nullptr;
  // A sentence for the person waiting ("lost pi2: ...; rescheduling on the others").
  std::function<void(const std::string& notice)> on_notice;
};

// REQUIRES: `prepared` has no kPower node and every transpose reads an input
// (transposes_to_inputs); `inputs` hold its inputs, checked for shape; model.nodes are the
// connection's links in order. Fills outcome.value and outcome.scheduled; a value that fails its
// check is still returned, with outcome.scheduled->verification saying why.
Status run_scheduled(cluster::ClusterConnection& connection, const model::ClusterModel& model, const Expr& prepared,
                     const std::map<std::string, linalg::MatrixView>& inputs, const ScheduledEvalOptions& options,
                     EvalOutcome& outcome);

}  // namespace tessera::balance::expr
