// The Session: opening a cluster, profiles, plans, multiplies, expressions and graph runs. Its
// matrices kept on the nodes are in resident_session.cpp; the state both share in session_state.hpp.
#include "tessera/balance/session/session.hpp"
#include "tessera/balance/session/settings.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <numeric>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "tessera/balance/expr/evaluate.hpp"
#include "tessera/balance/expr/rewrite.hpp"
#include "tessera/balance/expr/scheduled_eval.hpp"
#include "tessera/partition/row_partition.hpp"
#include "session_state.hpp"

namespace tessera::balance::session {

namespace {

plan::PlanRequest plan_request(const cluster::ClusterSpec& cluster, uint64_t m, uint64_t n, uint64_t k,
                         const MultiplyOptions& options) {
  plan::PlanRequest request;
  request.policy = plan::policy_kind(options.policy);
  request.m = m;
  request.n = n;
  request.k = k;
  request.panel_width = options.panel_width;
  request.panels_in_flight = options.panels_in_flight;
  request.refill_threshold = options.refill_threshold;
  request.layout = options.layout;
  request.distribution = options.distribution;
  if (const auto* dynamic = std::get_if<plan::DynamicPolicy>(&options.policy)) request.tile_rows = dynamic->tile_rows;
  for (const cluster::NodeSpec& node : cluster.nodes) request.node_names.push_back(node.name);
  return request;
}

// `per_file_node` (one entry per node of the cluster file) narrowed to the nodes taking part;
// anything of another length is left as it is, for the checks that name the mistake.
template <typename T>
std::vector<T> taking_part_only(std::vector<T> per_file_node, const std::vector<std::size_t>& file_positions,
                                std::size_t file_node_count) {
  if (per_file_node.size() != file_node_count || file_positions.size() == file_node_count) return per_file_node;
  std::vector<T> narrowed;
  for (std::size_t position : file_positions) narrowed.push_back(std::move(per_file_node[position]));
  return narrowed;
}

// Fails naming the first of `names` that was left out at the start, and why: asked for by name,
// it cannot silently be dropped (nor reported as no such node, which it is).
Status check_not_left_out(const std::vector<std::string>& names, const std::vector<cluster::LeftOutNode>& left_out) {
  for (const std::string& name : names) {
    for (const cluster::LeftOutNode& node : left_out) {
      if (node.node == name) {
        return Status(node.code, fmt::format("node '{}' was asked for, but did not answer at the start: {}", name,
                                             node.reason));
      }
    }
  }
  return Status::ok();
}

// The run's progress deadlines: the caller's fixed one, or per node from the profile's figures
// (plain numbers: run does not depend on profile). A node the profile lacks gets the floor.
multiply::ProgressDeadlines progress_deadlines(const cluster::ClusterSpec& cluster, const std::optional<profile::ClusterProfile>& profile,
                                     double node_timeout_s) {
  multiply::ProgressDeadlines deadlines;
  deadlines.node_timeout_s = node_timeout_s;
  for (const cluster::NodeSpec& node : cluster.nodes) {
    multiply::NodeExpectation expectation;
    if (const profile::NodeProfile* measured = profile ? profile->find(node.name) : nullptr) {
      if (measured->has_link) {
        expectation.to_node_bytes_per_s = measured->link.to_node_bytes_per_s;
        expectation.from_node_bytes_per_s = measured->link.from_node_bytes_per_s;
      }
      expectation.flops_per_s = measured->gflops * 1e9;
    }
    deadlines.nodes.push_back(expectation);
  }
  return deadlines;
}

}  // namespace

Result<PlannedMultiply> plan_policy(const cluster::ClusterSpec& cluster, const std::optional<profile::ClusterProfile>& profile,
                                    const std::string& profile_path, uint64_t m, uint64_t n, uint64_t k,
                                    const MultiplyOptions& options) {
  plan::PlanRequest request = plan_request(cluster, m, n, k, options);
  PlannedMultiply planned;
  if (std::holds_alternative<plan::ModelPolicy>(options.policy)) {
    if (!profile) {
      return not_found(fmt::format("the model policy needs a profile; run `tessera profile {}`", cluster.source_path));
    }
    Result<model::ClusterModel> model = profile::profile_model(*profile, cluster, profile_path);
    if (!model) return model.status();
    Result<model::ModelPlanResult> made = model::make_model_plan(request, *model);
    if (!made) return made.status();
    planned.plan = std::move(made->plan);
    planned.warnings = std::move(made->warnings);
    return planned;
  }
  if (const auto* proportional = std::get_if<plan::ProportionalPolicy>(&options.policy)) {
    if (!proportional->weights.empty()) {
      if (proportional->weights.size() != cluster.nodes.size()) {
        return invalid_argument(fmt::format("{} weights for {} nodes ({}); give one per node",
                                            proportional->weights.size(), cluster.nodes.size(), cluster.source_path));
      }
      request.weights = proportional->weights;
    } else {
      if (!profile) {
        return not_found(fmt::format("the proportional policy needs weights or a profile; run `tessera profile {}`",
                                     cluster.source_path));
      }
      Result<std::vector<double>> weights = profile_weights(*profile, cluster, profile_path);
      if (!weights) return weights.status();
      request.weights = std::move(*weights);
    }
  }
  Result<plan::Plan> plan = plan::make_plan(request);
  if (!plan) return plan.status();
  planned.plan = std::move(*plan);
  return planned;
}

Session::Session(std::unique_ptr<State> state) : state_(std::move(state)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() { close(); }

Result<Session> Session::open(emulation::ReachableCluster cluster, SessionOptions options) {
  if (options.peer_hosts.empty()) options.peer_hosts = std::move(cluster.peer_hosts);
  return open(std::move(cluster.spec), std::move(options));
}

Result<Session> Session::open(cluster::ClusterSpec cluster, SessionOptions options) {
  auto state = std::make_unique<State>();
  state->profile_path =
      options.profile_path.empty() ? profile::default_profile_path(cluster.source_path) : options.profile_path;
  if (Result<profile::ClusterProfile> loaded = profile::load_profile(state->profile_path)) {
    state->profile = std::move(*loaded);
  } else if (loaded.status().code() != StatusCode::kNotFound) {
    if (options.damaged_profile_is_error) return loaded.status();
    state->ignored_profile_problem = loaded.status();
  }
  cluster::ConnectOptions connect = options.connect;
  connect.leave_out_failed = !options.require_all;
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster, connect);
  if (!connection) return connection.status();
  state->connection = std::move(*connection);
  state->left_out = state->connection.left_out();
  state->file_node_count = cluster.nodes.size();
  std::vector<cluster::NodeSpec> taking_part;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    const bool left_out = std::any_of(state->left_out.begin(), state->left_out.end(),
                                      [&](const cluster::LeftOutNode& node) { return node.node == cluster.nodes[i].name; });
    if (left_out) continue;
    state->file_positions.push_back(i);
    taking_part.push_back(std::move(cluster.nodes[i]));
  }
  // Everything downstream (plans, weights, forecasts, deadlines, reports) reads the nodes from
  // here, in the order of the connection's links, so a node left out is simply not there.
  cluster.nodes = std::move(taking_part);
  state->cluster = std::move(cluster);
  state->options = std::move(options);
  return Session(std::move(state));
}

const cluster::ClusterSpec& Session::cluster() const { return state_->cluster; }
const std::vector<cluster::LeftOutNode>& Session::left_out_at_start() const { return state_->left_out; }
const std::string& Session::profile_path() const { return state_->profile_path; }
const std::optional<profile::ClusterProfile>& Session::profile() const { return state_->profile; }
std::optional<Status> Session::ignored_profile_problem() const { return state_->ignored_profile_problem; }

std::vector<transport::Hello> Session::node_facts() const {
  std::vector<transport::Hello> facts;
  for (const cluster::NodeLink& link : state_->connection.links()) facts.push_back(link.hello);
  return facts;
}

Result<profile::ClusterProfile> Session::measure_profile(const profile::ProfileOptions& options, const profile::ProfileProgress& progress,
                                                std::vector<std::string>* measured) {
  TESSERA_RETURN_IF_ERROR(check_not_left_out(options.only_nodes, state_->left_out));
  Result<profile::ClusterProfile> profile =
      profile::run_profile(state_->connection, state_->cluster, state_->profile, options, progress, measured);
  if (!profile) return profile.status();
  // A node that did not answer this time keeps what was measured of it before: it is still in the
  // cluster file, and the next run where it answers plans with those figures.
  if (state_->profile) {
    for (const cluster::LeftOutNode& absent : state_->left_out) {
      if (const profile::NodeProfile* saved = state_->profile->find(absent.node); saved && !profile->find(absent.node)) {
        profile->nodes.push_back(*saved);
      }
    }
  }
  TESSERA_RETURN_IF_ERROR(profile::save_profile(state_->profile_path, *profile));
  state_->profile = *profile;
  return profile;
}

std::vector<std::vector<std::string>> Session::taking_part_peer_hosts() const {
  std::vector<std::vector<std::string>> hosts =
      taking_part_only(state_->options.peer_hosts, state_->file_positions, state_->file_node_count);
  for (std::vector<std::string>& from : hosts) {
    from = taking_part_only(std::move(from), state_->file_positions, state_->file_node_count);
  }
  return hosts;
}

Status Session::measure_missing_profile(const RunControl& control) {
  if (state_->profile || !state_->options.measure_missing_profile) return Status::ok();
  if (control.on_notice) {
    control.on_notice(fmt::format("no profile at {}; measuring a quick one now (tessera profile --quick)",
                                  state_->profile_path));
  }
  profile::ProfileOptions quick;
  quick.quick = true;
  Result<profile::ClusterProfile> measured = measure_profile(quick, control.on_profile_progress);
  return measured ? Status::ok() : measured.status();
}

Result<PlannedMultiply> Session::plan(uint64_t m, uint64_t n, uint64_t k, const MultiplyOptions& options) const {
  return plan_policy(state_->cluster, state_->profile, state_->profile_path, m, n, k, options);
}

std::optional<model::Prediction> Session::forecast(const plan::Plan& plan) const {
  // The simulator replays row strips; 2D/3D runs go without a forecast.
  if (!state_->profile || plan.layout != partition::Layout::kRows) return std::nullopt;
  Result<model::ClusterModel> model = profile::profile_model(*state_->profile, state_->cluster, state_->profile_path);
  if (!model) return std::nullopt;
  // A dynamic run fixes no rows in advance: its forecast replays the pull protocol instead.
  if (plan.policy == plan::Policy::kDynamic) return model::predict_pull(*model, plan);
  return model::predict(*model, plan);
}

Result<MultiplyOutcome> Session::multiply(linalg::MatrixView a, linalg::MatrixView b, linalg::MutableMatrixView c,
                                          const MultiplyOptions& options, const RunControl& control) {
  TESSERA_RETURN_IF_ERROR(check_product_shapes("A", a.rows, a.cols, "B", b.rows, b.cols));
  if (plan::needs_profile(options.policy)) TESSERA_RETURN_IF_ERROR(measure_missing_profile(control));
  MultiplyOptions taking_part = options;
  if (auto* proportional = std::get_if<plan::ProportionalPolicy>(&taking_part.policy)) {
    proportional->weights =
        taking_part_only(std::move(proportional->weights), state_->file_positions, state_->file_node_count);
  }
  Result<PlannedMultiply> planned = plan(a.rows, b.cols, a.cols, taking_part);
  if (!planned) return planned.status();
  Result<multiply::MultiplyReport> report =
      run_plan_within(planned->plan, a, b, c, options.verify, options.verify_seed, control, options.node_timeout_s);
  if (!report) return report.status();
  return MultiplyOutcome{std::move(*report), std::move(planned->warnings)};
}

std::string_view eval_mode_name(EvalMode mode) {
  return mode == EvalMode::kScheduled ? "scheduled" : "sequence";
}

Result<EvalMode> parse_eval_mode(std::string_view name) {
  if (name == "scheduled") return EvalMode::kScheduled;
  if (name == "sequence") return EvalMode::kSequence;
  return invalid_argument(fmt::format("unknown evaluation mode '{}'; use scheduled or sequence", name));
}

Result<expr::EvalOutcome> Session::evaluate(const expr::Expr& e, const std::map<std::string, linalg::MatrixView>& inputs,
                                     const EvalOptions& options, const RunControl& control) {
  const auto start = std::chrono::steady_clock::now();
  expr::EvalOutcome outcome;
  outcome.written = e;
  outcome.rewritten = options.rewrite;
  outcome.left_out_at_start = state_->left_out;
  TESSERA_RETURN_IF_ERROR(check_not_left_out(options.only_nodes, state_->left_out));
  if (state_->profile) {
    double gflops = 0.0;
    for (const profile::NodeProfile& node : state_->profile->nodes) gflops += node.gflops;
    if (gflops > 0.0) outcome.weights.seconds_per_flop = 1.0 / (gflops * 1e9);
    if (state_->profile->coordinator_send_bytes_per_s > 0.0) {
      outcome.weights.seconds_per_moved_byte = 1.0 / state_->profile->coordinator_send_bytes_per_s;
    }
  }
  outcome.evaluated = options.rewrite ? expr::rewrite(e, outcome.weights) : e;
  if (options.mode == EvalMode::kScheduled) {
    // Tiles of products and sums only: powers squared when not rewritten, transposes on the inputs.
    outcome.evaluated = expr::eliminate_common(
        expr::transposes_to_inputs(options.rewrite ? outcome.evaluated : expr::powers_by_squaring(e)));
    for (const expr::Expr& node : expr::nodes_in_order(outcome.evaluated)) {
      if (node->op == expr::Op::kInput) TESSERA_RETURN_IF_ERROR(expr::input_view(node, inputs).status());
    }
    TESSERA_RETURN_IF_ERROR(measure_missing_profile(control));
    if (!state_->profile) {
      return not_found(fmt::format("the scheduled evaluation needs a profile; run `tessera profile {}`",
                                   state_->cluster.source_path));
    }
    Result<model::ClusterModel> model = profile::profile_model(*state_->profile, state_->cluster, state_->profile_path);
    if (!model) return model.status();
    CancelWatcher watcher(control.cancel, state_->connection);
    expr::ScheduledEvalOptions scheduled;
    scheduled.tile = options.tile;
    scheduled.cache_bytes = options.cache_bytes;
    scheduled.only_nodes = options.only_nodes;
    scheduled.every_node = options.every_node;
    scheduled.tile_route = options.tile_route;
    scheduled.node_timeout_s = options.multiply.node_timeout_s;
    scheduled.verify = options.multiply.verify;
    scheduled.verify_seed = options.multiply.verify_seed;
    scheduled.peer_hosts = taking_part_peer_hosts();
    scheduled.cancel = control.cancel;
    scheduled.on_notice = control.on_notice;
    TESSERA_RETURN_IF_ERROR(expr::run_scheduled(state_->connection, *model, outcome.evaluated, inputs, scheduled, outcome));
    if (options.multiply.verify != multiply::VerifyMode::kNone && !outcome.scheduled->verification.passed) {
      return verification_failed(fmt::format("the value of {} failed verification: {}", expr::to_string(e),
                                             outcome.scheduled->verification.detail));
    }
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return outcome;
  }
  // Each product on the cluster; a wrong one stops everything, since what uses it would be wrong too.
  const expr::MultiplyFn on_cluster = [&](const linalg::Matrix& a, const linalg::Matrix& b) -> Result<linalg::Matrix> {
    linalg::Matrix c(a.rows, b.cols);
    Result<MultiplyOutcome> product = multiply(a, b, c, options.multiply, control);
    if (!product) return product.status();
    const std::string label = fmt::format("product {} ({}x{} by {}x{})", outcome.products.size() + 1, a.rows, a.cols,
                                          b.rows, b.cols);
    const multiply::Verification& check = product->report.verification;
    if (options.multiply.verify != multiply::VerifyMode::kNone && !check.passed) {
      return verification_failed(fmt::format("{} failed verification: {}", label, check.detail));
    }
    outcome.products.push_back({label, std::move(product->report), std::move(product->warnings)});
    return c;
  };
  Result<linalg::Matrix> value = expr::evaluate(outcome.evaluated, inputs, on_cluster);
  if (!value) return value.status();
  outcome.value = std::move(*value);
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

Result<multiply::MultiplyReport> Session::run_plan(const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b,
                                         linalg::MutableMatrixView c, multiply::VerifyMode verify, uint64_t verify_seed,
                                         const RunControl& control) {
  return run_plan_within(plan, a, b, c, verify, verify_seed, control, 0.0);
}

Result<multiply::MultiplyReport> Session::run_plan_within(const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b,
                                                linalg::MutableMatrixView c, multiply::VerifyMode verify, uint64_t verify_seed,
                                                const RunControl& control, double node_timeout_s) {
  if (cancel_requested(control)) return cancelled("cancelled before the run started");
  // Forecast first, so a progress display can count down from it while the run goes on.
  std::optional<model::Prediction> prediction = forecast(plan);
  // The half of the check that reads only A and B runs beside the transfers, at the lowest
  // priority so it takes only CPU the coordinator and the local workers leave idle; after the run
  // only C remains to be read.
  std::future<multiply::ProductCheck> check = std::async(std::launch::async, [&] {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);  // this thread only (Linux)
    return multiply::ProductCheck::prepare(a, b, verify, verify_seed);
  });
  Result<multiply::MultiplyRun> run = [&] {
    CancelWatcher watcher(control.cancel, state_->connection);
    multiply::MultiplyHooks hooks;
    if (control.on_run_start) {
      hooks.on_start = [&](const multiply::JobCounts& jobs) { control.on_run_start(RunStart{plan, jobs, prediction}); };
    }
    hooks.on_credit = control.on_credit;
    hooks.deadlines = progress_deadlines(state_->cluster, state_->profile, node_timeout_s);
    hooks.peer_hosts = taking_part_peer_hosts();
    return multiply::run_multiply(state_->connection, plan, a, b, c, hooks);
  }();
  if (cancel_requested(control)) {
    close();
    return cancelled("the run was cancelled; the workers' sessions were closed");
  }
  if (!run) return run.status();
  multiply::MultiplyReport report;
  report.cluster = state_->cluster.name;
  report.plan = plan;
  report.run = std::move(*run);
  report.nodes = state_->cluster.nodes;
  report.left_out_at_start = state_->left_out;
  report.prediction = std::move(prediction);
  const auto complete = std::chrono::steady_clock::now();
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  report.verification = check.get().finish(c, threads);
  // What the user waited for after the product was complete, including any part of the A and B
  // pass that had not finished by then.
  report.verification.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - complete).count();
  return report;
}

namespace {

// What each node costs a graph run, cluster order, from the saved profile: its graph rates (zero
// when the profile has none for it), its link, and the switch's uplink for a node behind it (as
// measured, or as the cluster file gives it until a profile has measured it).
std::vector<graphs::GraphNodeCosts> graph_node_costs(const profile::ClusterProfile& profile, const cluster::ClusterSpec& cluster) {
  std::vector<graphs::GraphNodeCosts> costs;
  const double uplink = !cluster.network_switch                    ? 0.0
                        : profile.switch_uplink_bytes_per_s > 0.0 ? profile.switch_uplink_bytes_per_s
                                                                   : cluster.network_switch->uplink_bytes_per_s;
  for (const cluster::NodeSpec& spec : cluster.nodes) {
    graphs::GraphNodeCosts node;
    node.name = spec.name;
    if (cluster.behind_switch(static_cast<std::size_t>(&spec - cluster.nodes.data()))) node.switch_uplink_bytes_per_s = uplink;
    if (const profile::NodeProfile* measured = profile.find(spec.name)) {
      if (measured->graph) node.rates = *measured->graph;
      node.to_node_bytes_per_s = measured->link.to_node_bytes_per_s;
      node.from_node_bytes_per_s = measured->link.from_node_bytes_per_s;
      node.busy_latency_s = measured->link.busy_latency_s;
    }
    costs.push_back(std::move(node));
  }
  return costs;
}

}  // namespace

Result<graphs::GraphOutcome> Session::graph(const graphdata::DirectedGraph& graph, graphs::GraphRunOptions options,
                                   const RunControl& control) {
  if (cancel_requested(control)) return cancelled("cancelled before the run started");
  TESSERA_RETURN_IF_ERROR(check_not_left_out(options.nodes.listed, state_->left_out));
  // In cluster-file order, the caller's or the session's; the run has only the nodes that answered.
  if (options.peer_hosts.empty()) options.peer_hosts = state_->options.peer_hosts;
  options.peer_hosts = taking_part_only(std::move(options.peer_hosts), state_->file_positions, state_->file_node_count);
  for (std::vector<std::string>& receiver : options.peer_hosts) {
    receiver = taking_part_only(std::move(receiver), state_->file_positions, state_->file_node_count);
  }
  if (options.weights.source == graphs::TargetWeights::Source::kExplicit) {
    options.weights.weights =
        taking_part_only(std::move(options.weights.weights), state_->file_positions, state_->file_node_count);
  }
  std::string weights_source;
  if (options.weights.source == graphs::TargetWeights::Source::kProfile) {
    if (!state_->profile) {
      return not_found(fmt::format("--weights profile needs the nodes' measured speeds, and there is no profile at {}; "
                                   "run `tessera profile {}` or use --weights equal",
                                   state_->profile_path, state_->cluster.source_path));
    }
    Result<std::vector<double>> speeds = profile_weights(*state_->profile, state_->cluster, state_->profile_path);
    if (!speeds) return speeds.status();
    options.weights = graphs::TargetWeights{graphs::TargetWeights::Source::kExplicit, std::move(*speeds)};
    weights_source = fmt::format("profile {}", state_->profile_path);
  }
  if (options.node_costs.empty() && state_->profile) options.node_costs = graph_node_costs(*state_->profile, state_->cluster);
  // With graph rates measured, a node's share follows its edge updates per second, not its GEMM speed.
  if (!weights_source.empty() && !options.node_costs.empty() &&
      std::all_of(options.node_costs.begin(), options.node_costs.end(),
                  [](const graphs::GraphNodeCosts& node) { return node.rates.measured(); })) {
    options.weights.weights.clear();
    for (const graphs::GraphNodeCosts& node : options.node_costs) options.weights.weights.push_back(node.rates.edge_updates_per_s);
    options.weights_from_rates = true;
    weights_source += " (graph edge rates)";
  }
  if (options.secret.empty()) {
    if (Result<std::string> secret = state_->cluster.resolve_secret()) options.secret = std::move(*secret);
  }
  graphs::GraphHooks hooks;
  hooks.cancel = control.cancel;
  hooks.on_notice = control.on_notice;
  hooks.on_progress = control.on_graph_progress;
  Result<graphs::GraphOutcome> outcome = graphs::run_graph(state_->connection, graph, options, hooks);
  if (cancel_requested(control)) {
    close();
    return cancelled("the graph run was cancelled; the workers' sessions were closed");
  }
  if (outcome && !weights_source.empty()) outcome->weights = weights_source;
  if (outcome) outcome->left_out_at_start = state_->left_out;
  return outcome;
}

void Session::close() {
  if (state_) state_->connection.close();
}

}  // namespace tessera::balance::session
