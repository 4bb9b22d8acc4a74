// Progress lines for long runs: `tessera multiply` (share of its jobs each node has done, and an
// ETA from the model's forecast corrected by the progress observed) and `tessera graph` (the
// residual against the tolerance, and an ETA from the residual's decay).
//
// Two layers. The text is made by pure pieces, values in and a string out (ProgressGate,
// multiply_progress_text, multiply_eta_s, ResidualTrend, graph_progress_text): no clock and no
// I/O, so tests give them made-up times. ProgressPrinter puts that text on a stream: a ticker
// thread redraws the line in place with '\r', not before the run has lasted quiet_s (1 s, so
// short runs stay silent) and at most every min_interval_s (0.2 s), cut to the terminal's width so
// it never wraps, and stop() clears it so the report that follows starts on a clean line.
// Disabled (a pipe, a file, a CI log, `--progress never`), it writes only the notices passed
// through it, each as "text\n": the commands' output is then byte for byte what it was without it.
//
// Thread-safety: the pure pieces are values (thread-compatible). ProgressPrinter's methods may be
// called from any thread; its line function runs on the ticker under the printer's lock, the same
// lock update() runs its change under.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera::cli {

// --progress: auto (only when stderr is a terminal, the default), always, never.
enum class ProgressMode { kAuto, kAlways, kNever };
// "auto" | "always" | "never"; anything else fails with kInvalidArgument naming the three.
Result<ProgressMode> parse_progress_mode(std::string_view text);
// Whether to draw progress on `fd`: kAuto only when it is a terminal (isatty).
bool progress_wanted(ProgressMode mode, int fd);
// Columns of the terminal at `fd` (TIOCGWINSZ); else $COLUMNS when it is a number; else 80.
std::size_t terminal_columns(int fd);

// "0.4 s", "42 s", "3m05s", "2h10m": durations as a line that changes five times a second can
// show them without jumping in width more than it must.
std::string duration_text(double seconds);

// When a progress line may be drawn, and the bytes that draw and clear it.
class ProgressGate {
 public:
  struct Options {
    double quiet_s = 1.0;          // nothing before the run has lasted this long
    double min_interval_s = 0.2;   // at most one redraw per this many seconds
    std::size_t columns = 80;      // the terminal's width; lines are cut to columns - 1
  };
  ProgressGate() : ProgressGate(Options{}) {}
  explicit ProgressGate(Options options) : options_(options) {}

  // The bytes that redraw `line` at `elapsed_s` (seconds since the run began): '\r', the line
  // cut to columns - 1 characters (the cursor then never reaches the last column, where a
  // terminal would wrap), and erase-to-end-of-line (the previous line may have been longer).
  // "" when elapsed_s < quiet_s, when less than min_interval_s passed since the last redraw, or
  // when `line` is empty.
  std::string redraw(double elapsed_s, std::string_view line);
  // '\r' and erase-line when a line is on screen, so whatever is written next starts on an empty
  // row; "" when nothing is (then the output is exactly what it would be without progress).
  std::string clear();
  bool drawn() const { return drawn_; }

 private:
  Options options_;
  bool drawn_ = false;
  std::optional<double> last_redraw_s_;
};

// `text` cut to at most `columns` characters (UTF-8 code points, never split).
std::string fit_to_columns(std::string_view text, std::size_t columns);

// --- multiply ---------------------------------------------------------------------------------

// When answers were first seen, and how many: an observed rate is measured from there, because
// what came before (A travelling to the node, the first burst of jobs queueing) is not what the
// rest of the run looks like; on a Pi behind 100 Mbit/s it can be seconds.
struct FirstSeen {
  double at_s = 0.0;  // seconds since the run began
  uint64_t done = 0;  // jobs answered by then
};

struct NodeJobs {
  std::string name;
  uint64_t done = 0;     // credits the node returned so far
  uint64_t planned = 0;  // jobs the plan gives the node; 0 when not fixed in advance (dynamic)
  std::optional<double> predicted_s;  // the model's finish time of the node's share; none without one
  std::optional<FirstSeen> first;     // none until the node has answered a job
};

struct MultiplyProgress {
  std::vector<NodeJobs> nodes;        // plan order
  uint64_t total_jobs = 0;            // the whole run's
  std::optional<double> predicted_s;  // the model's forecast of the makespan; none without one
  std::optional<FirstSeen> first;     // the whole run's first answers
};

// Sets the nodes' jobs done (plan order; extra values are ignored) as seen `elapsed_s` into the
// run, noting when each node, and the run, first had any.
void record_jobs(MultiplyProgress& progress, const std::vector<uint64_t>& done, double elapsed_s);

// Jobs done over total_jobs, within [0, 1] (a lost node's tiles are done twice; 0 when total is 0).
double fraction_done(const MultiplyProgress& progress);

// Seconds left when `fraction` of some work is done after `elapsed_s`, the model having predicted
// `predicted_s` for all of it and `fraction_then` having been done at `since_s`, where the
// observed rate is measured from: none when nothing supports an estimate.
// REQUIRES: fractions within [0, 1], 0 <= since_s <= elapsed_s.
std::optional<double> multiply_eta_s(double fraction, double elapsed_s, std::optional<double> predicted_s,
                                     double since_s = 0.0, double fraction_then = 0.0);

// The run's ETA. A static plan ends when its slowest node does, and a whole-run share would hide
// a slow node behind fast ones, so it is the largest of the nodes' own estimates (each node's
// share done against its predicted finish; none while any of them has none). A dynamic plan's
// nodes drain one queue, so its ETA is the run's: all jobs done against the forecast makespan.
std::optional<double> run_eta_s(const MultiplyProgress& progress, double elapsed_s);

// "multiply  47%  2.1 s  ETA 3.2 s  |  desktop 61%  pi1 38%" (a dynamic run's nodes show jobs done,
// "desktop 12 jobs"; once every job is answered, "finishing" replaces the ETA: the last results
// and verification are not in the forecast). Most important first, so a narrow terminal cuts off
// nodes, not the ETA.
std::string multiply_progress_text(const MultiplyProgress& progress, double elapsed_s);

// --- graph ------------------------------------------------------------------------------------

// The residual's recent course, to extrapolate when it reaches the tolerance. A value.
class ResidualTrend {
 public:
  // Fits over the points of the last window_s seconds (at least kMinPoints of them): long enough
  // to average out the wobble of asynchronous polls, short enough to follow a rate that changes.
  explicit ResidualTrend(double window_s = 2.0) : window_s_(window_s) {}
  static constexpr std::size_t kMinPoints = 3;

  // A poll's or step's residual at `time_s` (non-decreasing). Points with residual <= 0 say the
  // run converged; they end the trend (eta_s is 0 from then on).
  void add(double time_s, double residual);
  // Seconds from the last point until the residual reaches `target` (> 0), on the least-squares
  // line through (time, ln residual) over the window: residuals of these iterations shrink by
  // about a constant factor per unit of time, so the logarithm falls about linearly. 0 when the
  // last residual is already within the target; none while the fit has too few points or the
  // residual is not falling.
  std::optional<double> eta_s(double target) const;
  std::optional<double> latest() const;

 private:
  double window_s_;
  std::deque<std::pair<double, double>> points_;  // (time_s, residual), within the window
};

// "graph  residual 3.2e-05 -> 1e-06  2.1 s  ETA 4.0 s" for pagerank/katz (tolerance > 0);
// "graph  pending 1234 vertices  2.1 s  ETA 4.0 s" for cc/sssp (tolerance 0, the residual a count);
// "graph  placing and shipping the parts  2.1 s" before the first poll.
std::string graph_progress_text(std::optional<double> residual, double tolerance, double elapsed_s,
                                std::optional<double> eta_s);

// --- on a stream ------------------------------------------------------------------------------

class ProgressPrinter {
 public:
  struct Options {
    ProgressGate::Options gate;
    // Seconds on a monotonic clock; tests inject their own.
    std::function<double()> clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
    // A thread that calls tick() every gate.min_interval_s once start()ed; tests call tick().
    bool ticker = true;
  };

  // `enabled` false: nothing but notices is ever written. `err` must outlive the printer.
  ProgressPrinter(std::ostream& err, bool enabled) : ProgressPrinter(err, enabled, Options{}) {}
  ProgressPrinter(std::ostream& err, bool enabled, Options options);
  ~ProgressPrinter();  // stop()
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  // The run began: the clock starts, and from now on the line is `line(elapsed_s)` (called under
  // the printer's lock; "" draws nothing). Later calls are ignored.
  void start(std::function<std::string(double elapsed_s)> line);
  // Runs `change` under the lock the line is made under, for state the line function reads.
  template <typename F>
  void update(F&& change) {
    std::lock_guard lock(mutex_);
    std::forward<F>(change)();
  }
  // Redraws the line if the gate allows it now. The ticker calls this; so may anyone.
  void tick();
  // Writes `text` and a newline on a row of its own (the progress line is cleared first and
  // redrawn at the next tick).
  void notice(const std::string& text);
  // Stops the ticker and clears the line. Idempotent; the destructor calls it.
  void stop();

 private:
  void tick_locked();

  std::ostream& err_;
  const bool enabled_;
  Options options_;
  std::mutex mutex_;
  ProgressGate gate_;
  std::function<std::string(double)> line_;
  std::optional<double> started_s_;
  bool stopped_ = false;
  std::condition_variable_any wake_;
  std::jthread ticker_;  // last: joined before the members it uses go
};

// A printer's options for stderr: lines as wide as stderr's terminal (terminal_columns).
ProgressPrinter::Options stderr_progress_options();

}  // namespace tessera::cli
