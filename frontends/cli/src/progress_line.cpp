#include "tessera/cli/progress_line.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <ostream>

#include <fmt/format.h>

namespace tessera::cli {

namespace {

constexpr std::string_view kEraseToEndOfLine = "\x1b[K";

}  // namespace

Result<ProgressMode> parse_progress_mode(std::string_view text) {
  if (text == "auto") return ProgressMode::kAuto;
  if (text == "always") return ProgressMode::kAlways;
  if (text == "never") return ProgressMode::kNever;
  return invalid_argument(fmt::format("unknown --progress '{}'; use auto (on a terminal only), always or never", text));
}

bool progress_wanted(ProgressMode mode, int fd) {
  switch (mode) {
    case ProgressMode::kAlways: return true;
    case ProgressMode::kNever: return false;
    case ProgressMode::kAuto: return ::isatty(fd) == 1;
  }
  return false;
}

std::size_t terminal_columns(int fd) {
  struct winsize size {};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr) {
    const std::string_view text(columns);
    std::size_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size() && value > 0) return value;
  }
  return 80;
}

std::string duration_text(double seconds) {
  seconds = std::max(0.0, seconds);
  if (seconds < 9.95) return fmt::format("{:.1f} s", seconds);
  if (seconds < 59.5) return fmt::format("{:.0f} s", seconds);
  const auto whole = static_cast<uint64_t>(std::llround(seconds));
  if (whole < 3600) return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  return fmt::format("{}h{:02}m", whole / 3600, whole % 3600 / 60);
}

std::string fit_to_columns(std::string_view text, std::size_t columns) {
  std::size_t characters = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    // A UTF-8 continuation byte belongs to the character before it.
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (characters == columns) return std::string(text.substr(0, i));
    ++characters;
  }
  return std::string(text);
}

std::string ProgressGate::redraw(double elapsed_s, std::string_view line) {
  if (line.empty() || elapsed_s < options_.quiet_s) return "";
  // The microsecond forgives the rounding of times summed in doubles (1.2 - 1.0 < 0.2).
  if (last_redraw_s_ && elapsed_s - *last_redraw_s_ < options_.min_interval_s - 1e-6) return "";
  last_redraw_s_ = elapsed_s;
  drawn_ = true;
  const std::size_t width = options_.columns > 1 ? options_.columns - 1 : 1;
  return "\r" + fit_to_columns(line, width) + std::string(kEraseToEndOfLine);
}

std::string ProgressGate::clear() {
  if (!drawn_) return "";
  drawn_ = false;
  return "\r" + std::string(kEraseToEndOfLine);
}

// --- multiply ---------------------------------------------------------------------------------

void record_jobs(MultiplyProgress& progress, const std::vector<uint64_t>& done, double elapsed_s) {
  uint64_t total = 0;
  for (std::size_t i = 0; i < progress.nodes.size() && i < done.size(); ++i) {
    NodeJobs& node = progress.nodes[i];
    node.done = done[i];
    if (!node.first && node.done > 0) node.first = FirstSeen{elapsed_s, node.done};
    total += node.done;
  }
  if (!progress.first && total > 0) progress.first = FirstSeen{elapsed_s, total};
}

double fraction_done(const MultiplyProgress& progress) {
  if (progress.total_jobs == 0) return 0.0;
  uint64_t done = 0;
  for (const NodeJobs& node : progress.nodes) done += node.done;
  return std::min(1.0, static_cast<double>(done) / static_cast<double>(progress.total_jobs));
}

std::optional<double> multiply_eta_s(double fraction, double elapsed_s, std::optional<double> predicted_s,
                                     double since_s, double fraction_then) {
  if (fraction >= 1.0) return 0.0;
  // Two rates of progress (share of the jobs per second): the model's, 1 / P for the predicted
  // finish P, and the one observed since the first answers came, (f - f0) / (t - t0). At the
  // start only the model knows anything; later the observed rate also holds what the model
  // cannot know (other load on a node, a slower link today). So the estimate blends them,
  // trusting the observed rate by the larger of the share of the work done and the share of the
  // predicted time that has passed (by the predicted finish the forecast has had its chance), and
  // the time left is the work left at that rate:
  //   w = max(f, min(1, t / P)),  rate = w (f - f0) / (t - t0) + (1 - w) / P,  left = (1 - f) / rate.
  // "Predicted finish minus elapsed" alone would fall below zero as soon as a run is slower than
  // forecast; this stays positive and converges on the observed rate as the run ends.
  const double observed = elapsed_s > since_s ? (fraction - fraction_then) / (elapsed_s - since_s) : 0.0;
  double rate = observed;
  if (predicted_s && *predicted_s > 0.0) {
    const double trust = std::max(fraction, std::min(1.0, elapsed_s / *predicted_s));
    rate = trust * observed + (1.0 - trust) / *predicted_s;
  }
  if (!(rate > 0.0)) return std::nullopt;
  return (1.0 - fraction) / rate;
}

std::optional<double> run_eta_s(const MultiplyProgress& progress, double elapsed_s) {
  std::optional<double> slowest;
  bool planned_per_node = false;
  for (const NodeJobs& node : progress.nodes) {
    if (node.planned == 0) continue;
    planned_per_node = true;
    const auto share_of = [&node](uint64_t done) {
      return std::min(1.0, static_cast<double>(done) / static_cast<double>(node.planned));
    };
    const FirstSeen first = node.first.value_or(FirstSeen{});
    const std::optional<double> eta =
        multiply_eta_s(share_of(node.done), elapsed_s, node.predicted_s, first.at_s, share_of(first.done));
    if (!eta) return std::nullopt;
    slowest = std::max(slowest.value_or(0.0), *eta);
  }
  if (planned_per_node) return slowest;
  const FirstSeen first = progress.first.value_or(FirstSeen{});
  const double then = progress.total_jobs > 0
                          ? std::min(1.0, static_cast<double>(first.done) / static_cast<double>(progress.total_jobs))
                          : 0.0;
  return multiply_eta_s(fraction_done(progress), elapsed_s, progress.predicted_s, first.at_s, then);
}

std::string multiply_progress_text(const MultiplyProgress& progress, double elapsed_s) {
  const double fraction = fraction_done(progress);
  const std::optional<double> eta = run_eta_s(progress, elapsed_s);
  // Every job answered: what remains (the last results, the workers' figures, verification) is
  // not in the forecast, so it is named rather than counted down.
  const std::string remaining = fraction >= 1.0 ? "finishing" : "ETA " + (eta ? duration_text(*eta) : "?");
  // Floors, so that 100% means done, not almost done.
  std::string text =
      fmt::format("multiply {:3.0f}%  {}  {}", std::floor(100.0 * fraction), duration_text(elapsed_s), remaining);
  std::string separator = "  |  ";
  for (const NodeJobs& node : progress.nodes) {
    text += separator;
    separator = "  ";
    if (node.planned > 0) {
      const double share = std::min(1.0, static_cast<double>(node.done) / static_cast<double>(node.planned));
      text += fmt::format("{} {:.0f}%", node.name, std::floor(100.0 * share));
    } else {
      text += fmt::format("{} {} jobs", node.name, node.done);
    }
  }
  return text;
}

// --- graph ------------------------------------------------------------------------------------

void ResidualTrend::add(double time_s, double residual) {
  points_.emplace_back(time_s, residual);
  while (points_.size() > kMinPoints && points_.front().first < time_s - window_s_) points_.pop_front();
}

std::optional<double> ResidualTrend::latest() const {
  if (points_.empty()) return std::nullopt;
  return points_.back().second;
}

std::optional<double> ResidualTrend::eta_s(double target) const {
  if (points_.empty()) return std::nullopt;
  const double last = points_.back().second;
  if (last <= target) return 0.0;
  // Least squares of ln(residual) on time over the window's positive points.
  double n = 0.0, sum_t = 0.0, sum_y = 0.0, sum_tt = 0.0, sum_ty = 0.0;
  for (const auto& [time, residual] : points_) {
    if (!(residual > 0.0)) continue;
    const double y = std::log(residual);
    n += 1.0;
    sum_t += time;
    sum_y += y;
    sum_tt += time * time;
    sum_ty += time * y;
  }
  if (n < static_cast<double>(kMinPoints)) return std::nullopt;
  const double spread = n * sum_tt - sum_t * sum_t;
  if (!(spread > 0.0)) return std::nullopt;
  const double slope = (n * sum_ty - sum_t * sum_y) / spread;  // d ln(residual) / dt
  if (!(slope < 0.0)) return std::nullopt;
  // From the last residual itself along the fitted slope: the newest point is the best estimate
  // of where the run is, the fit only of how fast it moves.
  return (std::log(target) - std::log(last)) / slope;
}

std::string graph_progress_text(std::optional<double> residual, double tolerance, double elapsed_s,
                                std::optional<double> eta_s) {
  if (!residual) return fmt::format("graph  placing and shipping the parts  {}", duration_text(elapsed_s));
  const std::string eta = eta_s ? duration_text(*eta_s) : "?";
  if (tolerance > 0.0) {
    return fmt::format("graph  residual {:.3g} -> {:g}  {}  ETA {}", *residual, tolerance, duration_text(elapsed_s), eta);
  }
  return fmt::format("graph  pending {:.0f} vertices  {}  ETA {}", *residual, duration_text(elapsed_s), eta);
}

// --- on a stream ------------------------------------------------------------------------------

ProgressPrinter::ProgressPrinter(std::ostream& err, bool enabled, Options options)
    : err_(err), enabled_(enabled), options_(std::move(options)), gate_(options_.gate) {}

ProgressPrinter::~ProgressPrinter() { stop(); }

void ProgressPrinter::start(std::function<std::string(double elapsed_s)> line) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  if (started_s_ || stopped_) return;
  line_ = std::move(line);
  started_s_ = options_.clock();
  if (!options_.ticker) return;
  const auto period = std::chrono::duration<double>(options_.gate.min_interval_s);
  ticker_ = std::jthread([this, period](std::stop_token stop) {
    std::unique_lock ticking(mutex_);
    while (!stop.stop_requested()) {
      // Never woken early on purpose: the wait returns at the period or when stop is requested.
      wake_.wait_for(ticking, stop, period, [] { return false; });
      if (stop.stop_requested()) break;
      tick_locked();
    }
  });
}

void ProgressPrinter::tick() {
  std::lock_guard lock(mutex_);
  tick_locked();
}

void ProgressPrinter::tick_locked() {
  if (!enabled_ || !started_s_ || stopped_) return;
  const double elapsed = options_.clock() - *started_s_;
  const std::string text = gate_.redraw(elapsed, line_(elapsed));
  if (!text.empty()) err_ << text << std::flush;
}

void ProgressPrinter::notice(const std::string& text) {
  std::lock_guard lock(mutex_);
  if (!enabled_) {
    err_ << text << "\n";
    return;
  }
  err_ << gate_.clear() << text << "\n" << std::flush;
}

void ProgressPrinter::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (ticker_.joinable()) {
    ticker_.request_stop();
    ticker_.join();
  }
  std::lock_guard lock(mutex_);
  if (enabled_) err_ << gate_.clear() << std::flush;
}

ProgressPrinter::Options stderr_progress_options() {
  ProgressPrinter::Options options;
  options.gate.columns = terminal_columns(STDERR_FILENO);
  return options;
}

}  // namespace tessera::cli
