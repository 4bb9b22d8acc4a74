// Progress lines without a terminal or a clock: when a line may be drawn (not in the first second,
// at most five times a second), what it says (shares per node, ETA), how it fits a narrow
// terminal, the ETA formulas, and the printer driven by an injected clock.
#include "tessera/cli/progress_line.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

namespace tessera::balance {
namespace {

const std::string kErase = "\x1b[K";

TEST(ProgressMode, ParsesTheThreeModesAndNamesThemOtherwise) {
  EXPECT_EQ(*cli::parse_progress_mode("auto"), cli::ProgressMode::kAuto);
  EXPECT_EQ(*cli::parse_progress_mode("always"), cli::ProgressMode::kAlways);
  EXPECT_EQ(*cli::parse_progress_mode("never"), cli::ProgressMode::kNever);
  Result<cli::ProgressMode> bad = cli::parse_progress_mode("sometimes");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("unknown --progress 'sometimes'; use auto"), std::string::npos)
      << bad.status().message();
  EXPECT_TRUE(cli::progress_wanted(cli::ProgressMode::kAlways, -1));
  EXPECT_FALSE(cli::progress_wanted(cli::ProgressMode::kNever, -1));
  EXPECT_FALSE(cli::progress_wanted(cli::ProgressMode::kAuto, -1)) << "no descriptor is no terminal";
}

TEST(ProgressText, Durations) {
  EXPECT_EQ(cli::duration_text(0.0), "0.0 s");
  EXPECT_EQ(cli::duration_text(-3.0), "0.0 s");
  EXPECT_EQ(cli::duration_text(2.14), "2.1 s");
  EXPECT_EQ(cli::duration_text(42.4), "42 s");
  EXPECT_EQ(cli::duration_text(185.0), "3m05s");
  EXPECT_EQ(cli::duration_text(7800.0), "2h10m");
}

TEST(ProgressGate, SilentForTheFirstSecondThenAtMostFiveTimesASecond) {
  cli::ProgressGate gate;
  for (double t : {0.0, 0.2, 0.5, 0.999}) EXPECT_EQ(gate.redraw(t, "line"), "") << t;
  EXPECT_FALSE(gate.drawn());
  EXPECT_EQ(gate.clear(), "") << "a run that ended within a second leaves no trace";
  EXPECT_EQ(gate.redraw(1.0, "line"), "\rline" + kErase);
  EXPECT_TRUE(gate.drawn());
  EXPECT_EQ(gate.redraw(1.1, "line"), "") << "too soon after the last";
  EXPECT_EQ(gate.redraw(1.2, "again"), "\ragain" + kErase);

  // Asked every 10 ms for ten seconds: never more than one redraw per 0.2 s.
  cli::ProgressGate busy;
  int redraws = 0;
  double last = -1.0;
  for (int step = 0; step <= 1000; ++step) {
    const double t = step * 0.01;
    if (!busy.redraw(t, "x").empty()) {
      ++redraws;
      if (last >= 0.0) {
        EXPECT_GE(t - last, 0.2 - 1e-6);
      }
      last = t;
    }
  }
  EXPECT_GE(redraws, 40);
  EXPECT_LE(redraws, 46);  // from 1 s to 10 s, one per 0.2 s
  EXPECT_EQ(busy.redraw(20.0, ""), "") << "an empty line draws nothing";
}

TEST(ProgressGate, ClearingLeavesAnEmptyRowOnce) {
  cli::ProgressGate gate;
  ASSERT_FALSE(gate.redraw(1.5, "multiply  10%").empty());
  EXPECT_EQ(gate.clear(), "\r" + kErase);
  EXPECT_EQ(gate.clear(), "") << "nothing on screen any more";
}

TEST(ProgressGate, NarrowTerminalsGetTheLineCutShortOfTheirLastColumn) {
  for (std::size_t columns : {1u, 2u, 10u, 20u, 79u}) {
    cli::ProgressGate gate(cli::ProgressGate::Options{1.0, 0.2, columns});
    const std::string line = "multiply  47%  2.1 s  ETA 3.2 s  |  desktop 61%  pi1 38%";
    const std::string drawn = gate.redraw(2.0, line);
    ASSERT_GE(drawn.size(), 1 + kErase.size());
    const std::string visible = drawn.substr(1, drawn.size() - 1 - kErase.size());
    EXPECT_EQ(visible, line.substr(0, columns > 1 ? columns - 1 : 1)) << columns;
  }
  // UTF-8 names are cut between characters, never inside one.
  EXPECT_EQ(cli::fit_to_columns("pi-\xcf\x80-3", 4), "pi-\xcf\x80");
  EXPECT_EQ(cli::fit_to_columns("pi-\xcf\x80-3", 3), "pi-");
  EXPECT_EQ(cli::fit_to_columns("short", 80), "short");
}

TEST(MultiplyProgress, SharesPerNodeByNameAndTheWholeRun) {
  cli::MultiplyProgress progress;
  progress.nodes = {{"desktop", 61, 100, {}, {}}, {"pi1", 19, 50, {}, {}}, {"pi2", 50, 50, {}, {}}};
  progress.total_jobs = 200;
  progress.predicted_s = 4.0;
  EXPECT_DOUBLE_EQ(cli::fraction_done(progress), 130.0 / 200.0);
  const std::string text = cli::multiply_progress_text(progress, 2.0);
  EXPECT_EQ(text.rfind("multiply  65%  2.0 s  ETA ", 0), 0u) << text;
  EXPECT_NE(text.find("  |  desktop 61%  pi1 38%  pi2 100%"), std::string::npos) << text;

  // Floors: a node one job short is not shown done; a node that took a lost node's tiles
  // stays at 100%, and so does the run.
  progress.nodes = {{"desktop", 999, 1000, {}, {}}, {"pi1", 80, 50, {}, {}}};
  progress.total_jobs = 1050;
  EXPECT_NE(cli::multiply_progress_text(progress, 9.0).find("desktop 99%  pi1 100%"), std::string::npos);
  progress.nodes[0].done = 1000;
  EXPECT_DOUBLE_EQ(cli::fraction_done(progress), 1.0);
  EXPECT_EQ(cli::multiply_progress_text(progress, 9.0).rfind("multiply 100%  9.0 s  finishing  |", 0), 0u)
      << "results and verification are not in the forecast";

  // Dynamic: nothing is planned per node, so each shows the jobs it did.
  cli::MultiplyProgress dynamic;
  dynamic.nodes = {{"desktop", 12, 0, {}, {}}, {"pi1", 3, 0, {}, {}}};
  dynamic.total_jobs = 60;
  const std::string pulled = cli::multiply_progress_text(dynamic, 1.5);
  EXPECT_NE(pulled.find("desktop 12 jobs  pi1 3 jobs"), std::string::npos) << pulled;
  EXPECT_EQ(pulled.rfind("multiply  25%  1.5 s  ETA 4.5 s", 0), 0u) << "no forecast: the observed rate" << pulled;

  cli::MultiplyProgress empty;
  EXPECT_EQ(cli::fraction_done(empty), 0.0);
  EXPECT_EQ(cli::multiply_progress_text(empty, 1.0), "multiply   0%  1.0 s  ETA ?");
}

TEST(MultiplyProgress, EtaStartsFromTheForecastAndEndsOnTheObservedRate) {
  // Nothing done yet: the forecast is all there is, and without one there is nothing.
  EXPECT_DOUBLE_EQ(*cli::multiply_eta_s(0.0, 0.0, 10.0), 10.0);
  EXPECT_EQ(cli::multiply_eta_s(0.0, 3.0, std::nullopt), std::nullopt);
  // Done is done.
  EXPECT_DOUBLE_EQ(*cli::multiply_eta_s(1.0, 12.0, 10.0), 0.0);
  // On schedule, model and observation agree.
  EXPECT_NEAR(*cli::multiply_eta_s(0.5, 5.0, 10.0), 5.0, 1e-12);
  // Without a forecast: the observed rate alone.
  EXPECT_NEAR(*cli::multiply_eta_s(0.25, 2.0, std::nullopt), 6.0, 1e-12);
  // Twice as slow as forecast: by the predicted finish the observed rate is fully trusted.
  EXPECT_NEAR(*cli::multiply_eta_s(0.5, 10.0, 10.0), 10.0, 1e-12);
  // Twice as fast: halfway, an even blend of the two rates (0.2/s observed, 0.1/s forecast).
  EXPECT_NEAR(*cli::multiply_eta_s(0.5, 2.5, 10.0), 0.5 / 0.15, 1e-12);
  // Past the predicted finish with nothing done: no rate supports an estimate.
  EXPECT_EQ(cli::multiply_eta_s(0.0, 12.0, 10.0), std::nullopt);
  // Never negative, and it shrinks as a steady run proceeds.
  double previous = 1e300;
  for (int step = 1; step <= 20; ++step) {
    const double t = 0.5 * step;  // a run at 1.5x the forecast's time: 15 s for P = 10 s
    const std::optional<double> eta = cli::multiply_eta_s(std::min(1.0, t / 15.0), t, 10.0);
    ASSERT_TRUE(eta.has_value());
    EXPECT_GE(*eta, 0.0);
    EXPECT_LT(*eta, previous) << t;
    previous = *eta;
  }
}

TEST(MultiplyProgress, AStaticRunEndsWithItsSlowestNode) {
  cli::MultiplyProgress progress;
  progress.nodes = {{"desktop", 100, 100, 2.0, {}}, {"pi1", 25, 100, 2.0, {}}};
  progress.total_jobs = 200;
  progress.predicted_s = 2.0;
  // 62% of all jobs are done, but pi1 has three quarters of its own left at a quarter per 2 s
  // (trusted fully: its predicted finish has passed).
  ASSERT_TRUE(cli::run_eta_s(progress, 2.0).has_value());
  EXPECT_NEAR(*cli::run_eta_s(progress, 2.0), 6.0, 1e-12);
  EXPECT_NE(cli::multiply_progress_text(progress, 2.0).find("ETA 6.0 s"), std::string::npos);
  // A node with neither a forecast nor a finished job leaves the run without an estimate.
  progress.nodes[1] = {"pi1", 0, 100, std::nullopt, std::nullopt};
  EXPECT_EQ(cli::run_eta_s(progress, 2.0), std::nullopt);
  // Nodes without planned jobs (a dynamic plan) fall back to the run's share and makespan.
  progress.nodes = {{"desktop", 30, 0, std::nullopt, std::nullopt}, {"pi1", 20, 0, std::nullopt, std::nullopt}};
  EXPECT_NEAR(*cli::run_eta_s(progress, 1.0), *cli::multiply_eta_s(0.25, 1.0, 2.0), 1e-12);
}

TEST(MultiplyProgress, TheObservedRateStartsAtTheFirstAnswers) {
  // A Pi whose A took 4 s to arrive: 10% at 4 s, 30% at 6 s is 10% a second from then on, not
  // 5% a second since the start.
  EXPECT_NEAR(*cli::multiply_eta_s(0.3, 6.0, std::nullopt, 4.0, 0.1), 7.0, 1e-12);
  EXPECT_NEAR(*cli::multiply_eta_s(0.3, 6.0, std::nullopt), 14.0, 1e-12);
  // At the first sighting itself nothing is observed yet: the model, or nothing.
  EXPECT_EQ(cli::multiply_eta_s(0.1, 4.0, std::nullopt, 4.0, 0.1), std::nullopt);
  EXPECT_NEAR(*cli::multiply_eta_s(0.1, 4.0, 40.0, 4.0, 0.1), 0.9 / (0.9 / 40.0), 1e-9);

  cli::MultiplyProgress progress;
  progress.nodes = {{"desktop", 0, 10, std::nullopt, std::nullopt}, {"pi1", 0, 10, std::nullopt, std::nullopt}};
  progress.total_jobs = 20;
  cli::record_jobs(progress, {0, 0}, 1.0);
  EXPECT_FALSE(progress.first.has_value());
  cli::record_jobs(progress, {2, 0}, 1.5);
  cli::record_jobs(progress, {4, 1}, 2.5);
  ASSERT_TRUE(progress.nodes[0].first.has_value());
  EXPECT_EQ(progress.nodes[0].first->at_s, 1.5);
  EXPECT_EQ(progress.nodes[0].first->done, 2u);
  EXPECT_EQ(progress.nodes[1].first->at_s, 2.5);
  EXPECT_EQ(progress.first->at_s, 1.5);
  EXPECT_EQ(progress.first->done, 2u);
  EXPECT_EQ(progress.nodes[0].done, 4u);
  // desktop: 20% a second since 1.5 s, 60% left: 3 s; pi1 has no rate yet and no forecast.
  EXPECT_EQ(cli::run_eta_s(progress, 2.5), std::nullopt);
  cli::record_jobs(progress, {6, 3}, 3.5);
  // desktop 40% left at 20%/s = 2 s; pi1 70% left at 20%/s = 3.5 s: the run waits for pi1.
  EXPECT_NEAR(*cli::run_eta_s(progress, 3.5), 3.5, 1e-12);
}

TEST(ResidualTrend, ExtrapolatesAnExponentialDecayToTheTolerance) {
  // r(t) = 1e-2 e^{-2t}: reaching 1e-6 takes ln(1e4) / 2 s from the start.
  cli::ResidualTrend trend;
  for (int step = 0; step <= 10; ++step) {
    const double t = 0.1 * step;
    trend.add(t, 1e-2 * std::exp(-2.0 * t));
  }
  ASSERT_TRUE(trend.eta_s(1e-6).has_value());
  EXPECT_NEAR(*trend.eta_s(1e-6), std::log(1e4) / 2.0 - 1.0, 1e-9);
  EXPECT_NEAR(*trend.latest(), 1e-2 * std::exp(-2.0), 1e-15);
  EXPECT_DOUBLE_EQ(*trend.eta_s(1.0), 0.0) << "already within the target";

  // When the rate changes, the window forgets the old one.
  for (int step = 1; step <= 40; ++step) {
    const double t = 1.0 + 0.1 * step;
    trend.add(t, 1e-2 * std::exp(-2.0) * std::exp(-0.5 * (t - 1.0)));
  }
  const double now = 1e-2 * std::exp(-2.0) * std::exp(-0.5 * 4.0);
  EXPECT_NEAR(*trend.eta_s(1e-6), (std::log(now) - std::log(1e-6)) / 0.5, 1e-6);
}

TEST(ResidualTrend, NoEtaFromTooFewPointsOrAResidualThatIsNotFalling) {
  cli::ResidualTrend trend;
  EXPECT_EQ(trend.eta_s(1e-6), std::nullopt);
  EXPECT_EQ(trend.latest(), std::nullopt);
  trend.add(0.0, 1.0);
  trend.add(0.1, 0.5);
  EXPECT_EQ(trend.eta_s(1e-6), std::nullopt) << "two points";
  trend.add(0.2, 0.25);
  EXPECT_TRUE(trend.eta_s(1e-6).has_value());

  cli::ResidualTrend rising;
  for (int step = 0; step < 5; ++step) rising.add(0.1 * step, 1.0 + step);
  EXPECT_EQ(rising.eta_s(1e-6), std::nullopt) << "a restart raised it";
  cli::ResidualTrend flat;
  for (int step = 0; step < 5; ++step) flat.add(0.1 * step, 3.0);
  EXPECT_EQ(flat.eta_s(1e-6), std::nullopt);
  cli::ResidualTrend converged;
  converged.add(0.0, 4.0);
  converged.add(0.1, 2.0);
  converged.add(0.2, 0.0);
  EXPECT_DOUBLE_EQ(*converged.eta_s(0.5), 0.0) << "a pending count of zero is done";
}

TEST(GraphProgress, ResidualAgainstTheToleranceOrPendingVertices) {
  EXPECT_EQ(cli::graph_progress_text(std::nullopt, 1e-6, 1.3, std::nullopt), "graph  placing and shipping the parts  1.3 s");
  EXPECT_EQ(cli::graph_progress_text(3.2e-5, 1e-6, 2.1, 4.0), "graph  residual 3.2e-05 -> 1e-06  2.1 s  ETA 4.0 s");
  EXPECT_EQ(cli::graph_progress_text(1234.0, 0.0, 75.0, std::nullopt), "graph  pending 1234 vertices  1m15s  ETA ?");
}

// A printer on a string, driven by a clock the test moves by hand and without its ticker thread.
class ManualPrinter : public ::testing::Test {
 protected:
  cli::ProgressPrinter::Options manual() {
    cli::ProgressPrinter::Options options;
    options.clock = [this] { return now_; };
    options.ticker = false;
    return options;
  }
  std::ostringstream err_;
  double now_ = 100.0;
};

TEST_F(ManualPrinter, DisabledItWritesTheNoticesAndNothingElse) {
  cli::ProgressPrinter printer(err_, false, manual());
  printer.start([](double) { return std::string("never shown"); });
  now_ += 5.0;
  printer.tick();
  printer.notice("a notice");
  printer.tick();
  printer.stop();
  EXPECT_EQ(err_.str(), "a notice\n") << "byte for byte what the commands wrote before progress lines";
}

TEST_F(ManualPrinter, DrawsAfterTheQuietSecondClearsForNoticesAndAtTheEnd) {
  cli::ProgressPrinter printer(err_, true, manual());
  int state = 0;
  printer.tick();  // not started: nothing
  printer.start([&state](double elapsed_s) { return "step " + std::to_string(state) + " at " + cli::duration_text(elapsed_s); });
  now_ += 0.5;
  printer.tick();
  EXPECT_EQ(err_.str(), "") << "within the first second";
  now_ += 0.5;
  printer.update([&] { state = 1; });
  printer.tick();
  EXPECT_EQ(err_.str(), "\rstep 1 at 1.0 s" + kErase);
  printer.notice("node pi1 lost");
  now_ += 0.3;
  printer.tick();
  printer.stop();
  printer.stop();
  now_ += 1.0;
  printer.tick();  // stopped: nothing more
  EXPECT_EQ(err_.str(), "\rstep 1 at 1.0 s" + kErase + "\r" + kErase + "node pi1 lost\n" + "\rstep 1 at 1.3 s" +
                            kErase + "\r" + kErase);
}

TEST_F(ManualPrinter, AShortRunLeavesNoTrace) {
  cli::ProgressPrinter printer(err_, true, manual());
  printer.start([](double) { return std::string("line"); });
  now_ += 0.9;
  printer.tick();
  printer.stop();
  EXPECT_EQ(err_.str(), "");
}

TEST(ProgressPrinter, TheTickerThreadStopsAndClears) {
  // The real clock and thread: whatever was drawn meanwhile, stop() joins and leaves a clean row.
  std::ostringstream err;
  cli::ProgressPrinter printer(err, true);
  printer.start([](double) { return std::string("line"); });
  printer.stop();
  const std::string out = err.str();
  EXPECT_TRUE(out.empty() || out.ends_with("\r" + kErase)) << out;
}

}  // namespace
}  // namespace tessera::balance
