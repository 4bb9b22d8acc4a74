#include "cluster_handle.hpp"

#include "tessera/balance/graphs/graph_report.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "arrays.hpp"
#include "errors.hpp"
#include "reports.hpp"
#include "run_control.hpp"
#include "tessera/balance/expr/parse.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/multiply/report.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/graph/algorithm.hpp"

namespace tessera::python {

namespace tb = tessera::balance;
namespace tp = tessera::partition;
namespace tg = tessera::graph;

namespace {

// What the run's threads report, handed to Python on the calling thread (run_interruptible's
// poll): credits per node, notices, the latest graph trace point.
class ProgressBox {
 public:
  explicit ProgressBox(std::vector<std::string> node_names)
      : node_names_(std::move(node_names)), jobs_done_(node_names_.size(), 0) {}

  // The nodes taking part once the session is open (the file's, less those left out at the start):
  // credits are numbered in the session's order. Before the run starts.
  void set_nodes(std::vector<std::string> node_names) {
    std::lock_guard<std::mutex> lock(mutex_);
    node_names_ = std::move(node_names);
    jobs_done_.assign(node_names_.size(), 0);
  }

  void credit(std::size_t node, uint64_t jobs_done) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (node < jobs_done_.size()) jobs_done_[node] = jobs_done;
    credits_changed_ = true;
  }
  void notice(std::string text) {
    std::lock_guard<std::mutex> lock(mutex_);
    notices_.push_back(std::move(text));
  }
  void trace(const tb::graphs::TracePoint& point) {
    std::lock_guard<std::mutex> lock(mutex_);
    trace_ = point;
  }

  // REQUIRES: the GIL. Calls the callbacks (each may be None) with what arrived since last time.
  void deliver(const py::object& progress, const py::object& notice) {
    std::vector<std::string> notices;
    std::vector<uint64_t> jobs;
    std::optional<tb::graphs::TracePoint> trace;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      notices.swap(notices_);
      if (credits_changed_) jobs = jobs_done_;
      credits_changed_ = false;
      trace.swap(trace_);
    }
    if (!notice.is_none()) {
      for (const std::string& text : notices) notice(text);
    }
    if (progress.is_none()) return;
    if (!jobs.empty()) {
      py::dict done;
      for (std::size_t i = 0; i < jobs.size(); ++i) done[py::str(node_names_[i])] = jobs[i];
      progress(done);
    }
    if (trace) {
      progress(py::dict(py::arg("time_s") = trace->time_s, py::arg("residual") = trace->residual,
                        py::arg("edge_updates") = trace->edge_updates,
                        py::arg("batches_sent") = trace->batches_sent,
                        py::arg("batches_received") = trace->batches_received));
    }
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> node_names_;
  std::vector<uint64_t> jobs_done_;
  bool credits_changed_ = false;
  std::vector<std::string> notices_;
  std::optional<tb::graphs::TracePoint> trace_;
};


}  // namespace

const tb::session::OptionSpelling& keyword_spelling() {
  static const tb::session::OptionSpelling spelling(tb::session::OptionSpelling::Style::kKeyword,
                                                    {{"node_timeout_s", "node_timeout"},
                                                     {"reference_size", "probe_size"},
                                                     {"only_nodes", "nodes"}});
  return spelling;
}

namespace {

// "node 'pi2' left out: ..." per node the session left out at the start, for TesseraWarning.
std::vector<std::string> left_out_warnings(const tb::session::Session& session) {
  std::vector<std::string> warnings;
  for (const tb::cluster::LeftOutNode& node : session.left_out_at_start()) {
    warnings.push_back(tb::cluster::left_out_warning(node));
  }
  return warnings;
}

// A worker whose session a call of ours abandoned answers BUSY for a moment (see open_session).
bool left_out_busy(const tb::session::Session& session) {
  return std::any_of(session.left_out_at_start().begin(), session.left_out_at_start().end(),
                     [](const tb::cluster::LeftOutNode& node) { return node.code == StatusCode::kBusy; });
}

}  // namespace

ClusterHandle::ClusterHandle(std::string config_path, std::string run_dir, std::string profile_path,
                             std::string worker_binary, bool keep_connected, bool require_all)
    : config_path_(std::move(config_path)),
      run_dir_(std::move(run_dir)),
      profile_path_(std::move(profile_path)),
      worker_binary_(std::move(worker_binary)),
      keep_connected_(keep_connected),
      require_all_(require_all) {
  // Read now so that a bad path or YAML fails at Cluster(...), not at the first call.
  value_or_raise(tb::cluster::load_cluster_spec(config_path_));
}

ClusterHandle::~ClusterHandle() {
  if (session_) session_->close();
}

std::string ClusterHandle::profile_path() const {
  return profile_path_.empty() ? tb::profile::default_profile_path(config_path_) : profile_path_;
}

std::vector<std::string> ClusterHandle::node_names() const {
  const tb::cluster::ClusterSpec spec = value_or_raise(tb::cluster::load_cluster_spec(config_path_));
  std::vector<std::string> names;
  for (const tb::cluster::NodeSpec& node : spec.nodes) names.push_back(node.name);
  return names;
}

tessera::emulation::LocalClusterOptions ClusterHandle::local_options() const {
  tessera::emulation::LocalClusterOptions options;
  options.run_dir = run_dir_;
  options.worker_binary = worker_binary_;
  return options;
}

py::dict ClusterHandle::up(bool no_emulation, double start_timeout_s) {
  const tb::cluster::ClusterSpec spec = value_or_raise(tb::cluster::load_cluster_spec(config_path_));
  tessera::emulation::LocalClusterOptions options = local_options();
  options.no_emulation = no_emulation;
  options.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(start_timeout_s * 1000.0));
  py::list warnings;
  bool any_emulated = false;
  for (const tb::cluster::NodeSpec& node : spec.nodes) any_emulated |= node.emulate.has_value();
  if (no_emulation && any_emulated) {
    warnings.append(fmt::format("no_emulation: the emulate: settings of {} are IGNORED; every node runs UNTHROTTLED "
                                "at this machine's full speed.",
                                config_path_));
  }
  for (const std::string& warning : tessera::emulation::secret_exposure_warnings(spec)) warnings.append(warning);
  const std::vector<tessera::emulation::NodeLifecycle> nodes =
      value_or_raise(without_gil([&] { return tessera::emulation::local_cluster_up(spec, options); }));
  for (const tessera::emulation::NodeLifecycle& node : nodes) {
    if (node.state == tessera::emulation::NodeState::kStarted) started_.push_back(node.name);
  }
  return py::dict(py::arg("nodes") = lifecycle_list(nodes), py::arg("warnings") = warnings,
                  py::arg("run_dir") = tessera::emulation::cluster_run_dir(spec, options));
}

py::list ClusterHandle::down(bool only_started) {
  drop_session();
  tb::cluster::ClusterSpec spec = value_or_raise(tb::cluster::load_cluster_spec(config_path_));
  if (only_started) {
    std::erase_if(spec.nodes, [this](const tb::cluster::NodeSpec& node) {
      return std::find(started_.begin(), started_.end(), node.name) == started_.end();
    });
    if (spec.nodes.empty()) return py::list();
  }
  const tessera::emulation::LocalClusterOptions options = local_options();
  const std::vector<tessera::emulation::NodeLifecycle> nodes =
      value_or_raise(without_gil([&] { return tessera::emulation::local_cluster_down(spec, options); }));
  started_.clear();
  return lifecycle_list(nodes);
}

py::list ClusterHandle::started() const { return py::cast(started_); }

py::list ClusterHandle::status() {
  const tb::cluster::ClusterSpec spec = value_or_raise(tessera::emulation::load_reachable_cluster(config_path_, run_dir_)).spec;
  const tessera::emulation::LocalClusterOptions options = local_options();
  return reachability_list(value_or_raise(without_gil([&] { return tessera::emulation::cluster_status(spec, options); })));
}

py::object ClusterHandle::saved_profile() const {
  const std::string path = profile_path();
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return py::none();
  return profile_dict(value_or_raise(tb::profile::load_profile(path)), path);
}

py::dict ClusterHandle::profile(const tb::profile::ProfileOptions& options, const py::object& progress) {
  tessera::emulation::ReachableCluster cluster = value_or_raise(tessera::emulation::load_reachable_cluster(config_path_, run_dir_));
  ok_or_raise(tb::session::check_profile_options(options, cluster.spec, config_path_, keyword_spelling()));
  // As `tessera profile`: a damaged saved profile is set aside (and replaced), not an error.
  drop_session();
  tb::session::SessionOptions session_options;
  session_options.profile_path = profile_path_;
  session_options.damaged_profile_is_error = false;
  session_options.require_all = require_all_;
  tb::session::Session session = value_or_raise(without_gil([&] { return tb::session::Session::open(std::move(cluster), session_options); }));
  std::vector<std::string> names;
  for (const tb::cluster::NodeSpec& node : session.cluster().nodes) names.push_back(node.name);
  ProgressBox box(names);
  if (std::optional<Status> problem = session.ignored_profile_problem()) {
    box.notice("ignoring the saved profile: " + problem->message());
  }
  std::vector<std::string> measured;
  std::atomic<bool> cancel{false};
  const tb::profile::ProfileProgress on_progress = [&box](const std::string& node, const std::string& what, bool done) {
    if (done) box.notice(fmt::format("{}: {}", node, what));
  };
  // measure_profile takes no cancel flag: a Ctrl-C is raised once the measurement has ended (the
  // thread is joined first), and the new profile is then not returned.
  std::optional<Result<tb::profile::ClusterProfile>> result;
  try {
    result = run_interruptible(
        cancel,
        [&] {
          return session.measure_profile(options, on_progress, &measured);
        },
        [&] { box.deliver(py::none(), progress); });
  } catch (...) {
    without_gil([&] { session.close(); });
    throw;
  }
  without_gil([&] { session.close(); });
  const tb::profile::ClusterProfile measured_profile = value_or_raise(std::move(*result));
  py::dict document = profile_dict(measured_profile, session.profile_path());
  document["measured"] = py::cast(measured);
  py::list left_out;
  for (const tb::cluster::LeftOutNode& node : session.left_out_at_start()) {
    left_out.append(py::dict(py::arg("node") = node.node, py::arg("reason") = node.reason));
  }
  document["left_out_at_start"] = left_out;
  document["warnings"] = py::cast(left_out_warnings(session));
  return document;
}

py::tuple ClusterHandle::profile_weights() const {
  const tb::cluster::ClusterSpec spec = value_or_raise(tb::cluster::load_cluster_spec(config_path_));
  const std::string path = profile_path();
  const tb::profile::ClusterProfile profile = value_or_raise(tb::profile::load_profile(path));
  std::vector<double> weights = value_or_raise(tb::profile::profile_weights(profile, spec, path));
  std::vector<std::string> names;
  for (const tb::cluster::NodeSpec& node : spec.nodes) names.push_back(node.name);
  return py::make_tuple(names, weights);
}

py::dict ClusterHandle::plan(uint64_t m, uint64_t n, uint64_t k, const tb::session::MultiplySettings& settings) const {
  const tb::cluster::ClusterSpec spec = value_or_raise(tb::cluster::load_cluster_spec(config_path_));
  const tb::session::MultiplyOptions options = value_or_raise(
      tb::session::resolve_multiply_settings(settings, spec.nodes.size(), config_path_, keyword_spelling()));
  const std::string path = profile_path();
  std::optional<tb::profile::ClusterProfile> profile;
  std::error_code error;
  if (std::filesystem::exists(path, error)) profile = value_or_raise(tb::profile::load_profile(path));
  const tb::session::PlannedMultiply planned = value_or_raise(tb::session::plan_policy(spec, profile, path, m, n, k, options));
  return py::dict(py::arg("plan") = plan_dict(planned.plan), py::arg("warnings") = py::cast(planned.warnings));
}

py::dict ClusterHandle::predict(const py::dict& plan_fields) const {
  const tb::plan::Plan plan = plan_from_dict(plan_fields);
  const tb::cluster::ClusterSpec spec = value_or_raise(tb::cluster::load_cluster_spec(config_path_));
  const std::string path = profile_path();
  const tb::profile::ClusterProfile profile = value_or_raise(tb::profile::load_profile(path));
  const tb::model::ClusterModel model = value_or_raise(tb::profile::profile_model(profile, spec, path));
  if (plan.shares.size() != spec.nodes.size()) {
    raise_status(invalid_argument(fmt::format("the plan has {} shares for the {} nodes of {}", plan.shares.size(),
                                              spec.nodes.size(), config_path_)));
  }
  return prediction_dict(tb::model::predict(model, plan), plan);
}

tb::session::Session& ClusterHandle::open_session(SessionKind kind, const tb::session::SessionOptions& given) {
  if (session_ && session_kind_ != kind) drop_session();
  if (!session_) {
    const tessera::emulation::ReachableCluster cluster =
        value_or_raise(tessera::emulation::load_reachable_cluster(config_path_, run_dir_));
    tb::session::SessionOptions options = given;
    options.require_all = require_all_;
    Result<tb::session::Session> opened = without_gil([&] { return tb::session::Session::open(cluster, options); });
    // A worker whose session we abandoned (Ctrl-C) answers BUSY until it notices the closed
    // connection, which takes it up to the job it is computing; that session was ours, so wait
    // for it rather than fail the next call or leave the worker out of it.
    const auto busy = [](const Result<tb::session::Session>& attempt) {
      return attempt ? left_out_busy(*attempt) : attempt.status().code() == StatusCode::kBusy;
    };
    while (busy(opened) && abandoned_at_ &&
           std::chrono::steady_clock::now() - *abandoned_at_ < kAbandonedSessionGrace) {
      opened = without_gil([&] {
        if (opened) opened->close();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return tb::session::Session::open(cluster, options);
      });
    }
    abandoned_at_.reset();
    session_.emplace(value_or_raise(std::move(opened)));
    ++session_generation_;
    resident_count_ = 0;
    session_kind_ = kind;
  }
  return *session_;
}

void ClusterHandle::finish_call() {
  if (!keep_connected_ && resident_count_ == 0) drop_session();
}

py::dict ClusterHandle::place(const py::array& a, const tb::session::PlacementSettings& settings) {
  const linalg::MatrixView a_view = input_view(a, "A");
  const tb::session::PlacementOptions options =
      value_or_raise(tb::session::resolve_placement_settings(settings, keyword_spelling()));
  std::atomic<bool> cancel{false};
  tb::session::RunControl control;
  control.cancel = &cancel;
  tb::session::ResidentPlacement placement;
  try {
    tb::session::Session& session = open_session(SessionKind::kMultiply, {});
    placement = value_or_raise(run_interruptible(
        cancel, [&] { return session.place_rows(a_view, options, control); }, {}));
  } catch (...) {
    if (session_) abandoned_at_ = std::chrono::steady_clock::now();
    drop_session();
    throw;
  }
  ++resident_count_;
  py::list nodes;
  for (const auto& [name, rows] : placement.rows_per_node) nodes.append(py::make_tuple(name, rows));
  return py::dict(py::arg("id") = placement.id, py::arg("generation") = session_generation_, py::arg("nodes") = nodes,
                  py::arg("bytes") = placement.bytes_placed, py::arg("bytes_reused") = placement.bytes_reused, py::arg("seconds") = placement.seconds,
                  py::arg("forecast_s") = placement.forecast_product_s,
                  py::arg("measured_s") = placement.measured_product_s,
                  py::arg("first_measured_s") = placement.first_measured_product_s,
                  py::arg("bytes_moved") = placement.bytes_moved, py::arg("measuring_rounds") = placement.measuring_rounds,
                  py::arg("remembered") = placement.remembered,
                  py::arg("warnings") = placement.warnings);
}

template <typename T>
T ClusterHandle::run_resident(uint64_t generation,
                              const std::function<Result<T>(tb::session::Session&, const tb::session::RunControl&)>& run,
                              std::vector<std::string>& notices) {
  if (!session_ || generation != session_generation_) {
    raise_status(not_found("the session that held this matrix has ended; it is placed again"));
  }
  std::atomic<bool> cancel{false};
  tb::session::RunControl control;
  control.cancel = &cancel;
  control.on_notice = [&notices](const std::string& notice) { notices.push_back(notice); };  // a lost node
  Result<T> outcome = [&] {
    try {
      return run_interruptible(cancel, [&] { return run(*session_, control); }, {});
    } catch (...) {  // Ctrl-C: the session was shut down under the call
      if (session_) abandoned_at_ = std::chrono::steady_clock::now();
      drop_session();
      throw;
    }
  }();
  if (!outcome) {
    // A refused input (b's length, a matrix that is not SPD) or a failed check leaves the session
    // sound; anything else (a node lost, a connection shut) leaves it in no known state, and the
    // matrix is placed again on the next call.
    const StatusCode code = outcome.status().code();
    if (code != StatusCode::kInvalidArgument && code != StatusCode::kVerificationFailed) drop_session();
    raise_status(outcome.status());
  }
  return std::move(*outcome);
}

py::dict ClusterHandle::resident_multiply(uint64_t id, uint64_t generation, const py::array& x, const py::array& y) {
  const linalg::MatrixView x_view = input_view(x, "X");
  const linalg::MutableMatrixView y_view = output_view(y, static_cast<uint64_t>(y.shape(0)), x_view.cols);
  std::vector<std::string> notices;
  const tb::multiply::ResidentProduct product = run_resident<tb::multiply::ResidentProduct>(
      generation,
      [&](tb::session::Session& session, const tb::session::RunControl& control) {
        return session.multiply_resident(id, x_view, y_view, control);
      },
      notices);
  uint64_t to_nodes = 0;
  uint64_t from_nodes = 0;
  py::dict finish;
  for (const tb::multiply::ResidentNodeRun& node : product.nodes) {
    to_nodes += node.bytes_to_node;
    from_nodes += node.bytes_from_node;
    finish[py::str(node.node)] = node.finish_s;
  }
  return py::dict(py::arg("verified") = product.verification.passed, py::arg("detail") = product.verification.detail,
                  py::arg("seconds") = product.seconds, py::arg("verification_seconds") = product.verification_seconds,
                  py::arg("bytes_to_nodes") = to_nodes, py::arg("bytes_from_nodes") = from_nodes,
                  py::arg("node_finish_s") = finish, py::arg("notices") = notices,
                  py::arg("node_rows") = node_rows(id));
}

py::list ClusterHandle::node_rows(uint64_t id) const {
  py::list rows;
  if (!session_) return rows;
  for (const auto& [name, held] : session_->resident_rows_per_node(id)) rows.append(py::make_tuple(name, held));
  return rows;
}

namespace {

py::dict iteration_dict(tb::multiply::IterationOutcome outcome, const std::vector<std::string>& notices,
                        py::list node_rows) {
  py::array_t<double> vector(static_cast<py::ssize_t>(outcome.vector.size()));
  std::copy(outcome.vector.begin(), outcome.vector.end(), vector.mutable_data());
  return py::dict(py::arg("vector") = vector, py::arg("value") = outcome.value,
                  py::arg("iterations") = outcome.iterations, py::arg("residual") = outcome.residual,
                  py::arg("converged") = outcome.converged, py::arg("seconds") = outcome.seconds,
                  py::arg("product_seconds") = outcome.product_seconds, py::arg("notices") = notices,
                  py::arg("node_rows") = std::move(node_rows));
}

}  // namespace

py::dict ClusterHandle::power_iteration(uint64_t id, uint64_t generation, uint32_t iterations, double tol,
                                        uint64_t seed) {
  tb::multiply::PowerOptions options;
  options.iterations = iterations;
  options.tol = tol;
  options.seed = seed;
  std::vector<std::string> notices;
  tb::multiply::IterationOutcome outcome = run_resident<tb::multiply::IterationOutcome>(
      generation,
      [&](tb::session::Session& session, const tb::session::RunControl& control) {
        return session.power_iteration(id, options, control);
      },
      notices);
  return iteration_dict(std::move(outcome), notices, node_rows(id));
}

py::dict ClusterHandle::conjugate_gradient(uint64_t id, uint64_t generation, const py::array& b, double tol,
                                           uint32_t max_iterations) {
  const linalg::MatrixView b_view = input_view(b, "b");
  tb::multiply::CgOptions options;
  options.tol = tol;
  options.max_iterations = max_iterations;
  std::vector<std::string> notices;
  tb::multiply::IterationOutcome outcome = run_resident<tb::multiply::IterationOutcome>(
      generation,
      [&](tb::session::Session& session, const tb::session::RunControl& control) {
        return session.conjugate_gradient(id, std::span<const double>(b_view.data, b_view.rows * b_view.cols),
                                          options, control);
      },
      notices);
  return iteration_dict(std::move(outcome), notices, node_rows(id));
}

void ClusterHandle::release(uint64_t id, uint64_t generation) {
  if (!session_ || generation != session_generation_) return;
  without_gil([&] { session_->release_resident(id); });
  if (resident_count_ > 0) --resident_count_;
  finish_call();
}

void ClusterHandle::drop_session() {
  if (!session_) return;
  without_gil([&] { session_->close(); });
  session_.reset();
}

void ClusterHandle::close() { drop_session(); }

py::tuple ClusterHandle::multiply(const py::array& a, const py::array& b, const py::array& c,
                                  const tb::session::MultiplySettings& settings, bool fill_output,
                                  const py::object& plan_fields,
                                  const py::object& progress, const py::object& notice) {
  const linalg::MatrixView a_view = input_view(a, "A");
  const linalg::MatrixView b_view = input_view(b, "B");
  ok_or_raise(tb::session::check_product_shapes("A", a_view.rows, a_view.cols, "B", b_view.rows, b_view.cols));
  const linalg::MutableMatrixView c_view = output_view(c, a_view.rows, b_view.cols);
  const std::vector<std::string> names = node_names();
  std::optional<tb::plan::Plan> given_plan;
  std::optional<tb::session::MultiplyOptions> options;
  if (!plan_fields.is_none()) {
    given_plan = plan_from_dict(plan_fields.cast<py::dict>());
    if (given_plan->m != a_view.rows || given_plan->k != a_view.cols || given_plan->n != b_view.cols) {
      raise_status(invalid_argument(fmt::format("the plan is for {}x{} times {}x{}, but A is {}x{} and B is {}x{}",
                                                given_plan->m, given_plan->k, given_plan->k, given_plan->n,
                                                a_view.rows, a_view.cols, b_view.rows, b_view.cols)));
    }
  }
  options = value_or_raise(tb::session::resolve_multiply_settings(settings, names.size(), config_path_, keyword_spelling()));
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const Clock::time_point check_start = Clock::now();
  if (!settings.allow_nonfinite) {
    ok_or_raise(without_gil([&] {
      Status finite = tb::session::check_finite_input(a_view, "A", "", keyword_spelling());
      return finite ? tb::session::check_finite_input(b_view, "B", "", keyword_spelling()) : finite;
    }));
  }
  const double check_s = seconds_since(check_start);
  // A C fresh from numpy.empty has no pages yet: written during the run, each first touch is a
  // page fault on a receiving thread, competing with the workers for the cores and lengthening the
  // makespan. The CLI's C is zero-filled when it is allocated, before the run; this does the same,
  // so the two match (scripts/bench-python.sh measures the Python call against the CLI).
  ok_or_raise(tb::session::check_multiply_memory(a_view.rows, b_view.cols, a_view.cols, options->verify, true, fill_output,
                                                "; multiply smaller matrices", keyword_spelling()));
  const Clock::time_point fill_start = Clock::now();
  if (fill_output) without_gil([&] { c_view.fill(0.0); });
  const double fill_s = seconds_since(fill_start);

  tb::session::SessionOptions session_options;
  session_options.profile_path = profile_path_;
  ProgressBox box(names);
  std::atomic<bool> cancel{false};
  tb::session::RunControl control;
  control.cancel = &cancel;
  control.on_credit = [&box](std::size_t node, uint64_t jobs_done) { box.credit(node, jobs_done); };
  control.on_notice = [&box](const std::string& text) { box.notice(text); };
  control.on_profile_progress = [&box](const std::string& node, const std::string& what, bool done) {
    if (done) box.notice(fmt::format("{}: {}", node, what));
  };
  try {
    const Clock::time_point open_start = Clock::now();
    tb::session::Session& session = open_session(SessionKind::kMultiply, session_options);
    const double open_s = seconds_since(open_start);
    std::vector<std::string> taking_part;
    for (const tb::cluster::NodeSpec& node : session.cluster().nodes) taking_part.push_back(node.name);
    box.set_nodes(std::move(taking_part));
    double driver_s = 0.0;
    Result<tb::session::MultiplyOutcome> outcome = run_interruptible(
        cancel,
        [&]() -> Result<tb::session::MultiplyOutcome> {
          const Clock::time_point driver_start = Clock::now();
          struct Stopwatch {
            double& seconds;
            Clock::time_point start;
            ~Stopwatch() { seconds = std::chrono::duration<double>(Clock::now() - start).count(); }
          } stopwatch{driver_s, driver_start};
          if (!given_plan) return session.multiply(a_view, b_view, c_view, *options, control);
          Result<tb::multiply::MultiplyReport> report =
              session.run_plan(*given_plan, a_view, b_view, c_view, options->verify, options->verify_seed, control);
          if (!report) return report.status();
          return tb::session::MultiplyOutcome{std::move(*report), {}};
        },
        [&] { box.deliver(progress, notice); });
    if (!outcome) raise_status(outcome.status());
    const Clock::time_point close_start = Clock::now();
    std::vector<std::string> warnings = left_out_warnings(session);
    warnings.insert(warnings.end(), outcome->warnings.begin(), outcome->warnings.end());
    finish_call();
    const double close_s = seconds_since(close_start);
    // Where the call's time went, for the overhead figures (scripts/bench-python.sh).
    py::dict timing(py::arg("input_check_s") = check_s, py::arg("output_fill_s") = fill_s,
                    py::arg("session_open_s") = open_s,
                    py::arg("driver_s") = driver_s, py::arg("session_close_s") = close_s);
    return py::make_tuple(tb::multiply::report_json(outcome->report), plan_dict(outcome->report.plan),
                          py::cast(warnings), tb::multiply::format_report_table(outcome->report), timing);
  } catch (...) {
    if (session_) abandoned_at_ = std::chrono::steady_clock::now();
    drop_session();
    throw;
  }
}

py::tuple ClusterHandle::evaluate(const std::string& expression, const py::dict& inputs,
                                  const tb::session::EvalSettings& settings, bool explain, const py::object& progress,
                                  const py::object& notice) {
  const tb::session::EvalOptions options =
      value_or_raise(tb::session::resolve_eval_settings(settings, config_path_, keyword_spelling()));
  std::map<std::string, linalg::MatrixView> views;
  std::map<std::string, tb::expr::Shape> shapes;
  for (const auto& [key, value] : inputs) {
    const std::string name = key.cast<std::string>();
    const linalg::MatrixView view = input_view(value.cast<py::array>(), name);
    ok_or_raise(without_gil([&] { return tb::session::check_finite_input(view, name, "", keyword_spelling()); }));
    views.emplace(name, view);
    shapes.emplace(name, tb::expr::Shape{view.rows, view.cols});
  }
  const tb::expr::Expr parsed = value_or_raise(tb::expr::parse(expression, shapes));
  tb::session::SessionOptions session_options;
  session_options.profile_path = profile_path_;
  ProgressBox box(node_names());
  std::atomic<bool> cancel{false};
  tb::session::RunControl control;
  control.cancel = &cancel;
  control.on_notice = [&box](const std::string& text) { box.notice(text); };
  try {
    tb::session::Session& session = open_session(SessionKind::kMultiply, session_options);
    Result<tb::expr::EvalOutcome> outcome = run_interruptible(
        cancel, [&] { return session.evaluate(parsed, views, options, control); },
        [&] { box.deliver(progress, notice); });
    if (!outcome) raise_status(outcome.status());
    const std::vector<std::string> warnings = left_out_warnings(session);
    finish_call();
    const std::size_t rows = outcome->value.rows, cols = outcome->value.cols;
    std::string report = tb::expr::eval_report_json(*outcome);
    std::string table = tb::expr::format_eval_table(*outcome, explain);
    return py::make_tuple(to_numpy(std::move(outcome->value.values)), rows, cols, std::move(report), std::move(table),
                          warnings);
  } catch (...) {
    if (session_) abandoned_at_ = std::chrono::steady_clock::now();
    drop_session();
    throw;
  }
}

py::tuple ClusterHandle::graph(const graphdata::DirectedGraph& graph, const tb::session::GraphSettings& settings,
                               const std::string& weights, const py::object& progress, const py::object& notice) {
  const tb::cluster::ClusterSpec spec = value_or_raise(tessera::emulation::load_reachable_cluster(config_path_, run_dir_)).spec;
  tb::graphs::GraphRunOptions options =
      value_or_raise(tb::session::graph_run_options(settings, graph, keyword_spelling()));
  const tg::AlgorithmSpec algorithm = options.algorithm;
  // Everything that needs only the graph fails here, before a connection is made.
  ok_or_raise(without_gil([&] { return tb::graphs::check_graph_run(graph, algorithm); }));
  value_or_raise(tb::graphs::run_tolerance(algorithm, settings.tolerance));
  std::vector<std::string> names;
  for (const tb::cluster::NodeSpec& node : spec.nodes) names.push_back(node.name);
  ProgressBox box(names);
  const std::string path = profile_path();
  if (!weights.empty()) {
    options.weights = value_or_raise(tb::graphs::parse_target_weights(weights));
  } else if (std::error_code error; std::filesystem::exists(path, error)) {
    options.weights = value_or_raise(tb::graphs::parse_target_weights("profile"));
  } else {
    box.notice(fmt::format("note: no profile at {}; sharing the graph equally (run cluster.profile() or `tessera "
                           "profile {}` to weight the nodes by speed)",
                           path, config_path_));
  }

  tb::session::SessionOptions session_options;
  session_options.profile_path = profile_path_;
  session_options.connect.required_capabilities = transport::kCapabilityGraph;
  session_options.damaged_profile_is_error = options.weights.source == tb::graphs::TargetWeights::Source::kProfile;
  session_options.measure_missing_profile = false;
  std::atomic<bool> cancel{false};
  tb::session::RunControl control;
  control.cancel = &cancel;
  control.on_notice = [&box](const std::string& text) { box.notice(text); };
  control.on_graph_progress = [&box](const tb::graphs::TracePoint& point) { box.trace(point); };
  try {
    tb::session::Session& session = open_session(SessionKind::kGraph, session_options);
    Result<tb::graphs::GraphOutcome> outcome = run_interruptible(
        cancel, [&] { return session.graph(graph, std::move(options), control); },
        [&] { box.deliver(progress, notice); });
    if (!outcome) raise_status(outcome.status());
    const std::vector<std::string> warnings = left_out_warnings(session);
    finish_call();
    // The JSON of `tessera graph --report` (graph_report.hpp), with the settings given here.
    const tb::graphs::GraphReportHeader header{spec.name, "",
                                       {{"poll_ms", settings.poll_ms}, {"seed", static_cast<double>(settings.seed)}}};
    std::string report = tb::graphs::graph_report_json(header, graph, *outcome, /*indent=*/-1);
    return py::make_tuple(to_numpy(std::move(outcome->values)), std::move(report), warnings);
  } catch (...) {
    if (session_) abandoned_at_ = std::chrono::steady_clock::now();
    drop_session();
    throw;
  }
}

}  // namespace tessera::python
