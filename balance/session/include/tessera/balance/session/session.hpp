// Session: the coordinator facade every front end calls (the `tessera` CLI, the study runner, the
// Python module). It opens a cluster, loads or measures its profile, plans a multiply by a policy,
// runs it, verifies the product and forecasts it, evaluates matrix expressions product by product,
// runs graph algorithms on the cluster's graph services, and returns all of that as values. It prints
// nothing: progress and notices go to callbacks the caller supplies, and failures come back as
// Status with a message written for the user.
//
// Ownership: a Session owns its connections to the workers (closed by close() or the destructor)
// and a copy of the cluster spec and profile. Matrices are the caller's: multiply() reads A and B
// and writes C through views and keeps no reference after it returns.
// Thread-safety: one call at a time per Session (not synchronised); callbacks run on the calling
// thread or on the run's node threads, as documented at each.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/expr/eval_report.hpp"
#include "tessera/balance/expr/scheduled_eval.hpp"
#include "tessera/balance/multiply/report.hpp"
#include "tessera/balance/multiply/multiply.hpp"
#include "tessera/balance/multiply/iterate.hpp"
#include "tessera/balance/multiply/resident.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/core/status.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::session {

struct MultiplyOptions {
  plan::PolicyChoice policy = plan::ProportionalPolicy{};
  partition::Layout layout = partition::Layout::kRows;  // model and dynamic plan rows only
  // How B reaches the nodes (plan::Distribution): unset, the model policy chooses by forecast and
  // the others send it to each node; chain needs the rows layout and a static policy.
  std::optional<plan::Distribution> distribution;
  uint64_t panel_width = 256;      // rows of B per panel, clipped to k
  uint32_t panels_in_flight = 4;   // queue depth per node; 1 = no overlap (send, wait, send)
  uint32_t refill_threshold = 1;   // credits back before the next burst, 1..panels_in_flight
  multiply::VerifyMode verify = multiply::VerifyMode::kFreivalds;
  uint64_t verify_seed = 1;
  // Seconds a node that owes us frames may stay silent before the run drops it as unresponsive
  // and reissues its tiles. 0 (default): derived per node from the profile's link speeds and GEMM
  // rate and the work in flight, at least 10 s (see ProgressDeadlines in run/multiply.hpp).
  double node_timeout_s = 0.0;
};

// What a multiply is about to do, told once when its work is cut, before the first frame is sent.
struct RunStart {
  plan::Plan plan;
  multiply::JobCounts jobs;                       // credits expected per node (0s under dynamic) and in total
  std::optional<model::Prediction> forecast;  // the model's, as the report will carry it; none without one
};

// How a caller watches and stops a run.
struct RunControl {
  // Set (from any thread, also a signal handler) to stop: the sessions are shut down within about
  // 50 ms and the call fails with kCancelled. The Session is closed afterwards.
  const std::atomic<bool>* cancel = nullptr;
  // A multiply's work is cut and about to be sent (called on the calling thread, once per run).
  std::function<void(const RunStart&)> on_run_start;
  // A node returned a credit (called on that node's streaming thread).
  std::function<void(std::size_t node_index, uint64_t jobs_done)> on_credit;
  // A sentence for the person waiting ("no profile at ...; measuring a quick one now").
  std::function<void(const std::string& notice)> on_notice;
  // Progress of a profile measured on the way (see ProfileProgress).
  profile::ProfileProgress on_profile_progress;
  // A graph run's residual after each poll or step (called on the calling thread).
  std::function<void(const graphs::TracePoint&)> on_graph_progress;
};

struct SessionOptions {
  std::string profile_path;  // empty: next to the cluster's config (default_profile_path)
  // connect.leave_out_failed is not read: open() sets it from require_all.
  cluster::ConnectOptions connect;
  // false (default, the CLI's and Python's default too): a node that is unreachable or refuses
  // the session when open() connects is left out (left_out_at_start() says which and why) and the
  // session runs on the nodes that answered, as Dask and Ray do; open() fails only when none
  // answers. true (`--require-all`, `require_all=True`): any such node fails open(), naming it.
  bool require_all = false;
  // A saved profile that cannot be read fails open() (true) or is set aside, its problem kept in
  // ignored_profile_problem() (false).
  bool damaged_profile_is_error = true;
  // multiply() measures a quick profile (and saves it) when the policy needs one and none exists.
  bool measure_missing_profile = true;
  // How each node's worker reaches each other node's, hosts[receiver][peer] in cluster-file order
  // (ReachableCluster::peer_hosts for emulated clusters); empty: at the nodes' hosts. Chain
  // multiplies, worker-to-worker tiles and graph runs (unless GraphRunOptions gives some) use it.
  std::vector<std::vector<std::string>> peer_hosts;
};

struct PlannedMultiply {
  plan::Plan plan;
  std::vector<std::string> warnings;  // e.g. nodes the model gives nothing, and why
};

struct MultiplyOutcome {
  multiply::MultiplyReport report;              // plan, run statistics, verification, prediction, nodes left out
  std::vector<std::string> warnings;  // from planning
};

// How an expression runs. scheduled: lowered to a DAG of tile tasks, placed by HEFT with a tile
// cache per node, simulated for each candidate tile size, and the best schedule run on the
// workers, intermediates staying on the node that computed them. sequence: one verified
// multiply per product, every intermediate back on the coordinator (the naive way, kept as the
// baseline the scheduled mode is measured against).
enum class EvalMode { kScheduled, kSequence };
std::string_view eval_mode_name(EvalMode mode);
Result<EvalMode> parse_eval_mode(std::string_view name);  // scheduled | sequence

struct EvalOptions {
  MultiplyOptions multiply;  // sequence: how each product runs; both: verify mode and seed
  bool rewrite = true;       // rewrite by cost first (expr/rewrite.hpp); false: as written
  EvalMode mode = EvalMode::kScheduled;
  uint64_t tile = 0;         // scheduled: the tile size; 0 chooses among candidates by simulation
  // scheduled: each node's tile cache in bytes; 0: half the tile memory its worker offers.
  double cache_bytes = 0.0;
  // scheduled: only these nodes take part (e.g. the fastest alone); empty: every node.
  std::vector<std::string> only_nodes;
  // scheduled: every node taking part gets tasks. false: the fastest node alone, the fastest two,
  // ... are scheduled too, and fewer nodes run when they are forecast clearly faster (where
  // moving tiles to slow nodes costs more than their help).
  bool every_node = false;
  // scheduled: how tiles move between nodes; direct needs every node's worker to send tiles
  // (transport::kCapabilityTileSend), else they go through the coordinator.
  expr::TileRoute tile_route = expr::TileRoute::kAuto;
};

// EvalProduct and EvalOutcome are in expr/eval_report.hpp, with their table and JSON.

// How place_rows shares a matrix out: for products by operands of `columns` columns, over
// `nodes` (names; empty: every node of the session), balanced (from the profile, then measured on
// the placed rows: multiply::balance_resident) or even (every node the same rows, as the tools
// that split by count do).
struct PlacementOptions {
  enum class Split { kBalanced, kEven };
  uint64_t columns = 1;
  std::vector<std::string> nodes;
  Split split = Split::kBalanced;
  bool measure = true;  // kBalanced: move the shares to what products on the placed rows show
  // kBalanced: the products the matrix will serve; a move is made only when it repays its
  // transfer within them (multiply::BalanceOptions::expected_products).
  uint64_t expected_products = 100;
  // kBalanced with measure: where the measured shares are remembered for the next session on the
  // same matrix (which then places them as they were and measures nothing); "" none.
  std::string memory_dir;
  // Pieces go through the block stores of nodes that have one (multiply::ResidentOptions::
  // use_block_stores): loaded where a node kept them, the rest sent to be kept. Off: every piece sent
  // and nothing kept (a study measuring what placing costs).
  bool use_block_stores = true;
};

// A matrix the session keeps on its nodes (place_rows), by id.
struct ResidentPlacement {
  uint64_t id = 0;
  std::vector<std::pair<std::string, uint64_t>> rows_per_node;  // node name, rows held (cluster order)
  uint64_t bytes_placed = 0;          // rows sent, moves included
  uint64_t bytes_reused = 0;          // rows not sent: the nodes' block stores had them (earlier sessions)
  double seconds = 0.0;               // placing and measuring
  double forecast_product_s = 0.0;    // the profile's product time with the first shares; 0 without one
  double measured_product_s = 0.0;    // the median product with the shares kept (0: not measured)
  double first_measured_product_s = 0.0;  // ... with the first shares
  uint64_t bytes_moved = 0;           // rows moved between nodes by the measuring
  int measuring_rounds = 0;
  bool remembered = false;            // the shares an earlier session measured, placed again unmeasured
  std::vector<std::string> warnings;  // a sentence per node left out, and why
};

class Session {
 public:
  // Connects to every node of `cluster` (in parallel, authenticated) and loads the saved profile
  // if there is one. Nodes that do not answer are left out (SessionOptions::require_all); fails
  // naming each node and why when none answers (or, with require_all, when any does not), and
  // naming a node that lacks a service the session needs.
  static Result<Session> open(cluster::ClusterSpec cluster, SessionOptions options = {});
  // The same on a cluster file as this machine reaches it (emulation::load_reachable_cluster, the
  // one call every front end makes): its emulated endpoints, and its peer hosts unless `options`
  // gives some.
  static Result<Session> open(emulation::ReachableCluster cluster, SessionOptions options = {});

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // The nodes taking part: the cluster file's, less those left out at the start (cluster order).
  // Plans, weights, forecasts and reports cover these nodes only.
  const cluster::ClusterSpec& cluster() const;
  // The nodes open() left out, and why (cluster order); empty when every node answered. Front
  // ends show each as a warning (cluster::left_out_warning); reports carry them.
  const std::vector<cluster::LeftOutNode>& left_out_at_start() const;
  const std::string& profile_path() const;
  const std::optional<profile::ClusterProfile>& profile() const;
  std::optional<Status> ignored_profile_problem() const;
  // The connected nodes, cluster order (what each worker said about itself in HELLO).
  std::vector<transport::Hello> node_facts() const;

  // Measures the nodes the saved profile cannot supply (all of them with options.refresh), saves
  // the result to profile_path() and keeps it. `measured` receives the names actually measured.
  // Nodes left out at the start are not measured; their saved figures are kept in the file.
  Result<profile::ClusterProfile> measure_profile(const profile::ProfileOptions& options, const profile::ProfileProgress& progress = {},
                                         std::vector<std::string>* measured = nullptr);

  // The plan `options` gives for C(m x n) = A(m x k) B(k x n) on this cluster. Planning needs no
  // network; policies that need a profile fail without one (multiply() measures it first).
  Result<PlannedMultiply> plan(uint64_t m, uint64_t n, uint64_t k, const MultiplyOptions& options) const;

  // Plans, runs, verifies and forecasts C = A x B. REQUIRES: a.cols == b.rows; c is a.rows x
  // b.cols. Fails on bad input, a node that cannot take its share, every node lost, or
  // cancellation; a product that fails verification is a success whose report says so
  // (report.verification.passed), so the caller decides what that means.
  Result<MultiplyOutcome> multiply(linalg::MatrixView a, linalg::MatrixView b, linalg::MutableMatrixView c,
                                   const MultiplyOptions& options, const RunControl& control = {});

  // Evaluates a matrix expression: rewritten by cost (weights from the profile: the nodes' summed
  // GEMM speed and the coordinator's send capacity; flops only without a profile), then each
  // product runs on the cluster as multiply() runs it, verified, and sums, scales and
  // transposes are computed here. Every intermediate comes back to the coordinator (the task
  // DAG that keeps them on the nodes is not built yet). A product that fails verification stops
  // the evaluation with kVerificationFailed naming it; inputs missing or misshapen are refused by
  // name. REQUIRES: `inputs` hold every input of `e`.
  Result<expr::EvalOutcome> evaluate(const expr::Expr& e, const std::map<std::string, linalg::MatrixView>& inputs,
                               const EvalOptions& options, const RunControl& control = {});

  // Runs an existing plan (its shares must name this cluster's nodes in order), then verifies and
  // forecasts as multiply() does. Silent nodes are dropped after the derived deadline
  // (MultiplyOptions::node_timeout_s = 0).
  Result<multiply::MultiplyReport> run_plan(const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b,
                                  linalg::MutableMatrixView c, multiply::VerifyMode verify, uint64_t verify_seed,
                                  const RunControl& control = {});

  // Runs a graph algorithm over every node (balance/graphs/graph_run.hpp) and returns the values
  // with the run's figures. options.weights `profile` becomes the nodes' measured speeds (fails
  // with kNotFound naming `tessera profile` when there is no profile); options.secret defaults
  // to the cluster's, so a node that ends its session with an ERROR is reconnected. Open the
  // session with ConnectOptions::required_capabilities including kCapabilityGraph to refuse
  // workers without the graph service at connect time (they fail the run by name otherwise).
  // control.cancel stops the run (kCancelled; the session is closed), control.on_notice hears
  // about lost nodes and restarts. A failed verification is a success whose outcome says so.
  Result<graphs::GraphOutcome> graph(const graphdata::DirectedGraph& graph, graphs::GraphRunOptions options,
                             const RunControl& control = {});

  // Keeps `a`'s rows on the nodes for as long as this session lasts (multiply/resident.hpp), shares
  // sized for products by operands of options.columns columns: balanced, from the profile's rates
  // and links (multiply::resident_rows: a node whose operand alone would arrive after the others
  // finish is left out, with a warning saying so; equal shares without a profile), then moved to
  // what products on the placed rows measure (multiply::balance_resident); or even. A node that
  // cannot hold its share fails the call, named; nothing placed is left behind. An unknown or
  // unconnected node in options.nodes is refused, named. `a` is borrowed for as long as the
  // placement lives (keep it unchanged): a node lost later has its rows placed again from it.
  Result<ResidentPlacement> place_rows(linalg::MatrixView a, const PlacementOptions& options = {},
                                       const RunControl& control = {});
  // Y = A X with A the placed matrix `id`: only X and Y travel; checked (verification in the
  // result: a product that fails it is a success the caller refuses). kNotFound for an id this
  // session does not hold. A node lost during a product (killed, silent past its deadline, an
  // ERROR) has its rows placed again on the others from the matrix placed, control.on_notice
  // hears of it, and the product runs again; the call fails when no node is left.
  Result<multiply::ResidentProduct> multiply_resident(uint64_t id, linalg::MatrixView x, linalg::MutableMatrixView y,
                                                      const RunControl& control = {});
  // Iterative methods over the placed matrix `id` (multiply/iterate.hpp), lost nodes survived as
  // above; kNotFound as above.
  Result<multiply::IterationOutcome> power_iteration(uint64_t id, const multiply::PowerOptions& options,
                                                     const RunControl& control = {});
  Result<multiply::IterationOutcome> conjugate_gradient(uint64_t id, std::span<const double> b,
                                                        const multiply::CgOptions& options,
                                                        const RunControl& control = {});
  // Frees the placed matrix `id` on the nodes; nothing for an unknown id.
  void release_resident(uint64_t id);
  // The rows each node of the session holds of resident matrix `id` now (cluster order; 0 for a
  // node holding none): after a lost node's rows were placed again, not what the placement said.
  // Empty when there is no such matrix.
  std::vector<std::pair<std::string, uint64_t>> resident_rows_per_node(uint64_t id) const;

  // The model's forecast of `plan`; none without a profile or for layouts the model cannot replay.
  std::optional<model::Prediction> forecast(const plan::Plan& plan) const;

  // Says BYE to every node and closes the connections. Idempotent.
  void close();

 private:
  // A placed matrix with the caller's matrix it was placed from (session.cpp).
  struct ResidentEntry;
  // The placed matrix `id`, or kNotFound naming it.
  Result<ResidentEntry*> resident_entry(uint64_t id);
  // Measures a quick profile when there is none and the options allow it (saying so first).
  Status measure_missing_profile(const RunControl& control);
  // SessionOptions::peer_hosts narrowed to the nodes taking part, both ways (hosts[from][to]).
  std::vector<std::vector<std::string>> taking_part_peer_hosts() const;
  Result<multiply::MultiplyReport> run_plan_within(const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b,
                                         linalg::MutableMatrixView c, multiply::VerifyMode verify, uint64_t verify_seed,
                                         const RunControl& control, double node_timeout_s);
  struct State;
  explicit Session(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The plan a policy gives without a Session (no connection needed): what `tessera model` prints.
// `profile` is needed by the policies needs_profile() names.
Result<PlannedMultiply> plan_policy(const cluster::ClusterSpec& cluster, const std::optional<profile::ClusterProfile>& profile,
                                    const std::string& profile_path, uint64_t m, uint64_t n, uint64_t k,
                                    const MultiplyOptions& options);

}  // namespace tessera::balance::session
