// ClusterHandle: the C++ side of tessera.Cluster. One object per cluster file; it starts and stops
// local workers, reads status and profiles, plans, multiplies and runs graph algorithms through
// the Session facade, and hands results back as plain Python data (reports.hpp) for the Python
// classes to wrap. The multiply and graph options arrive as session::MultiplySettings and
// session::GraphSettings, a profile's as profile::ProfileOptions (bound in module.cpp), whose default-constructed values give the Python
// signatures their defaults; docstrings live in the tessera package (tessera/cluster.py).
//
// Nodes that do not answer when a session opens are left out (require_all false, the default of
// session::SessionOptions) and named in the warnings and reports each call returns, or fail the
// call (require_all true).
// Sessions: with keep_connected false (the default) every call that needs the workers opens a
// Session and closes it before returning, as the CLI does, so other coordinators (a `tessera`
// command, another script) find the workers free between calls. With keep_connected true one
// Session is kept for the next call; a call that fails or is interrupted closes it, and the next
// call opens a new one. Long calls run interruptibly (run_control.hpp): Ctrl-C cancels the run,
// the workers' sessions are closed at once, and KeyboardInterrupt propagates.
// Memory: multiply() reads A and B and writes C through views of the caller's arrays (no copy);
// nothing is kept after it returns. Not thread-safe: one call at a time per object (the Python
// class serialises them with a lock).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/balance/session/settings.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::python {

namespace py = pybind11;

// How Python spells an option in a message: `panels_in_flight=4`, `policy="even"`, with the
// keywords whose names differ from their field (`node_timeout=`) renamed.
const balance::session::OptionSpelling& keyword_spelling();

class ClusterHandle {
 public:
  ClusterHandle(std::string config_path, std::string run_dir, std::string profile_path, std::string worker_binary,
                bool keep_connected, bool require_all);
  ~ClusterHandle();
  ClusterHandle(const ClusterHandle&) = delete;
  ClusterHandle& operator=(const ClusterHandle&) = delete;

  const std::string& config_path() const { return config_path_; }
  std::string profile_path() const;
  std::vector<std::string> node_names() const;

  // {"nodes": [{name, state, pid, detail}], "warnings": [...], "run_dir": str}; remembers the
  // nodes this call started.
  py::dict up(bool no_emulation, double start_timeout_s);
  // Stops every recorded worker, or (only_started) just the ones up() of this object started.
  py::list down(bool only_started);
  py::list started() const;
  py::list status();

  py::object saved_profile() const;  // the profile dict, or None when there is no profile file
  py::dict profile(const balance::profile::ProfileOptions& options, const py::object& progress);

  // The profile dict also holds "left_out_at_start" ([{node, reason}]) and "warnings" (one line per
  // node left out, not measured; its saved figures stay in the file).
  // (node names, weights) from the saved profile, as `tessera partition --cluster` takes them.
  py::tuple profile_weights() const;
  // {"plan": plan dict, "warnings": [...]} without connecting (what `tessera model` prints).
  py::dict plan(uint64_t m, uint64_t n, uint64_t k, const balance::session::MultiplySettings& settings) const;
  // The model's forecast of a plan dict; raises when there is no profile.
  py::dict predict(const py::dict& plan) const;

  // C = A B into `c`. With `plan` (a plan dict) runs that plan (Session::run_plan) instead of
  // planning. Returns (report JSON text, plan dict, warnings (nodes left out at the start first,
  // then the plan's), the CLI's report table, timing dict:
  // input_check_s, output_fill_s, session_open_s, driver_s (Session::multiply or run_plan),
  // session_close_s). Nonfinite inputs are refused unless
  // settings.allow_nonfinite. fill_output: zero `c` before the run (a fresh numpy.empty, whose pages would
  // otherwise be faulted in during it). `progress(dict node -> jobs done)` and `notice(str)` are called on the
  // calling thread about every 50 ms; either may be None.
  py::tuple multiply(const py::array& a, const py::array& b, const py::array& c,
                     const balance::session::MultiplySettings& settings, bool fill_output, const py::object& plan,
                     const py::object& progress, const py::object& notice);

  // Evaluates a matrix expression (the `tessera eval` grammar) over the named arrays, each product
  // on the cluster (Session::evaluate). Returns (values as a flat float64 array, rows, cols, the
  // report JSON text, the CLI's table with `explain`'s trees when asked, warnings: one per node
  // left out at the start).
  // `settings` (mode, tile, nodes, policy, verify, ...) are checked and resolved as the CLI's are.
  py::tuple evaluate(const std::string& expression, const py::dict& inputs,
                     const balance::session::EvalSettings& settings, bool explain, const py::object& progress,
                     const py::object& notice);

  // Runs a graph algorithm; returns (values float64 array, outcome JSON text, warnings: one per
  // node left out at the start). `weights`:
  // "profile" | "equal" | "w1,w2,..."; empty: profile when a profile exists, else equal.
  py::tuple graph(const graphdata::DirectedGraph& graph, const balance::session::GraphSettings& settings,
                  const std::string& weights, const py::object& progress, const py::object& notice);

  // Keeps `a`'s rows on the nodes (Session::place_rows) and keeps the session open while any
  // placed matrix lives; shares as `settings` says. Returns {id, generation,
  // nodes: [(name, rows)], bytes, seconds, forecast_s, measured_s, first_measured_s, bytes_moved,
  // measuring_rounds, warnings}.
  py::dict place(const py::array& a, const balance::session::PlacementSettings& settings);
  // Y = A X for the placed matrix `id` of session `generation`, into `y`; returns {verified,
  // detail, seconds, verification_seconds, bytes_to_nodes, bytes_from_nodes}. A generation that is
  // not the open session's raises NotFoundError: the caller places the matrix again.
  py::dict resident_multiply(uint64_t id, uint64_t generation, const py::array& x, const py::array& y);
  // Power iteration and conjugate gradient over the placed matrix (multiply/iterate.hpp); return
  // {vector: float64 array, value, iterations, residual, converged, seconds, product_seconds}.
  // A generation that is not the open session's raises NotFoundError, as resident_multiply.
  py::dict power_iteration(uint64_t id, uint64_t generation, uint32_t iterations, double tol, uint64_t seed);
  py::dict conjugate_gradient(uint64_t id, uint64_t generation, const py::array& b, double tol, uint32_t max_iterations);
  // Frees the placed matrix (nothing when its session is gone).
  void release(uint64_t id, uint64_t generation);
  // (node, rows) of resident matrix `id` now: what a lost node's rows moving changed.
  py::list node_rows(uint64_t id) const;

  // Closes a kept session (BYE to every node). Idempotent.
  void close();

 private:
  enum class SessionKind { kMultiply, kGraph };
  balance::session::Session& open_session(SessionKind kind, const balance::session::SessionOptions& options);
  void finish_call();    // closes the session unless keep_connected
  // run(session, control) on the open session that placed a matrix in `generation` (NotFoundError
  // when it is not the open one: the caller places the matrix again), interruptibly; a failure
  // raises, closing the session unless only the input was refused or a check failed. `notices`
  // gets the session's notices (a node lost and its rows placed again on the others).
  template <typename T>
  T run_resident(uint64_t generation,
                 const std::function<Result<T>(balance::session::Session&, const balance::session::RunControl&)>& run,
                 std::vector<std::string>& notices);
  void drop_session();   // closes it whatever keep_connected says
  emulation::LocalClusterOptions local_options() const;

  std::string config_path_;
  std::string run_dir_;
  std::string profile_path_;  // as given; empty: next to the config
  std::string worker_binary_;
  bool keep_connected_ = false;
  bool require_all_ = false;
  std::vector<std::string> started_;
  std::optional<balance::session::Session> session_;
  // When a call that failed or was interrupted closed a live session (see open_session).
  std::optional<std::chrono::steady_clock::time_point> abandoned_at_;
  static constexpr std::chrono::seconds kAbandonedSessionGrace{5};
  SessionKind session_kind_ = SessionKind::kMultiply;
  // Counts the sessions opened, so that a placed matrix knows whether its session still stands.
  uint64_t session_generation_ = 0;
  std::size_t resident_count_ = 0;  // placed matrices alive in the open session
};

}  // namespace tessera::python
