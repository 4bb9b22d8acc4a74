// Matrix expressions against real tessera-worker processes on loopback: Session::evaluate and
// `tessera eval` give exactly what the same expression gives computed here (integer inputs keep
// every product exact), each product verified on the cluster; bad expressions, inputs and
// absent nodes are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <thread>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "process_fixture.hpp"
#include "tessera/balance/expr/evaluate.hpp"
#include "tessera/balance/expr/parse.hpp"
#include "tessera/balance/expr/rewrite.hpp"
#include "tessera/balance/session/session.hpp"

namespace tessera::balance {
namespace {

using testing::ChildProcess;
using testing::TempDir;

class EvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::LocalCluster started = testing::start_local_cluster("eval", "eval-secret", 3, dir_);
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

// Entries in -2..2 (integers in [-8, 8] mod 3): products of a few stay exact in float64.
linalg::Matrix small_integers(std::size_t rows, std::size_t cols, uint64_t seed) {
  linalg::Matrix m = linalg::random_matrix(rows, cols, seed, linalg::FillKind::kIntegers);
  for (double& v : m.values) v = std::fmod(v, 3.0);
  return m;
}

// Measures a quick profile of `cluster` and saves it with every node given the first node's figures
// (its CREDIT costs included): HEFT then spreads tasks evenly over the nodes, however a loaded
// machine made one of them look fast or slow.
void save_profile_with_every_node_like_the_first(const cluster::ClusterSpec& cluster) {
  Result<session::Session> measuring = session::Session::open(cluster);
  ASSERT_TRUE(measuring.is_ok()) << measuring.status().to_string();
  profile::ProfileOptions quick;
  quick.quick = true;
  Result<profile::ClusterProfile> profile = measuring->measure_profile(quick);
  ASSERT_TRUE(profile.is_ok()) << profile.status().to_string();
  const profile::NodeProfile first = profile->nodes[0];
  for (profile::NodeProfile& node : profile->nodes) {
    profile::NodeProfile same = first;
    same.name = node.name;
    same.endpoint = node.endpoint;
    same.fingerprint = node.fingerprint;
    node = same;
  }
  ASSERT_TRUE(profile::save_profile(measuring->profile_path(), *profile).is_ok());
}

TEST_F(EvalTest, EveryBenchmarkShapeMatchesTheLocalValueExactly) {
  Result<session::Session> session = session::Session::open(cluster_);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  const std::map<std::string, linalg::Matrix> values = {
      {"u", small_integers(1, 48, 1)},  {"P", small_integers(48, 48, 2)}, {"A", small_integers(40, 70, 3)},
      {"B", small_integers(70, 9, 4)},  {"C", small_integers(9, 55, 5)},  {"D", small_integers(55, 3, 6)},
      {"H", small_integers(30, 48, 7)}, {"L", small_integers(48, 48, 8)}};
  std::map<std::string, expr::Shape> shapes;
  std::map<std::string, linalg::MatrixView> views;
  for (const auto& [name, m] : values) {
    shapes.emplace(name, expr::Shape{m.rows, m.cols});
    views.emplace(name, linalg::MatrixView(m));
  }
  // Markov chain, matrix power, a HITS step, a Leontief series, a mixed-shape chain.
  for (const std::string text : {"u * P^6", "P^5", "H' * H * (H' * H) * u'", "I + L + L^2 + L^3", "A * B * C * D"}) {
    SCOPED_TRACE(text);
    Result<expr::Expr> e = expr::parse(text, shapes);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    Result<linalg::Matrix> local = expr::evaluate(*e, views);
    ASSERT_TRUE(local.is_ok()) << local.status().to_string();
    for (bool rewrite : {true, false}) {
      // Sequence; scheduled in 16 x 16 tiles (many tasks per product, sums of tiles, tiles fetched
      // between nodes); scheduled with the tile size the simulation picks.
      for (const auto& [mode, tile] : {std::pair{session::EvalMode::kSequence, uint64_t{0}}, std::pair{session::EvalMode::kScheduled, uint64_t{16}},
                                       std::pair{session::EvalMode::kScheduled, uint64_t{0}}}) {
        SCOPED_TRACE(fmt::format("rewrite {}, {} tile {}", rewrite, session::eval_mode_name(mode), tile));
        session::EvalOptions options;
        options.rewrite = rewrite;
        options.mode = mode;
        options.tile = tile;
        options.multiply.policy = plan::EvenPolicy{};
        options.multiply.verify = multiply::VerifyMode::kExact;
        Result<expr::EvalOutcome> outcome = session->evaluate(*e, views, options);
        ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
        EXPECT_EQ(outcome->value.values, local->values);
        if (mode == session::EvalMode::kSequence) {
          EXPECT_EQ(outcome->products.size(), expr::cost(outcome->evaluated).products);
          for (const expr::EvalProduct& product : outcome->products) {
            EXPECT_TRUE(product.report.verification.passed) << product.expression;
          }
        } else {
          ASSERT_TRUE(outcome->scheduled.has_value());
          EXPECT_TRUE(outcome->scheduled->verification.passed) << outcome->scheduled->verification.detail;
          EXPECT_TRUE(outcome->products.empty());
          if (tile != 0) {
            EXPECT_EQ(outcome->scheduled->tile, tile);
          }
        }
      }
    }
  }
}

// Input tiles at least 256 wide go out a row per buffer from the caller's matrix (whole rows as one
// piece), narrower ones packed: P (600 wide) in 256 tiles has both and edge tiles of 88; A' reads
// A's tiles transposed; a strided view (the first 512 columns of a 700-wide matrix) must send only its
// own columns. Every value exact.
TEST_F(EvalTest, InputTilesSentFromTheCallersRowsAreExact) {
  Result<session::Session> session = session::Session::open(cluster_);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  const linalg::Matrix p = small_integers(600, 600, 21);
  const linalg::Matrix a = small_integers(300, 256, 22);    // one tile wide: whole rows
  const linalg::Matrix wide = small_integers(300, 700, 23);  // its first 512 columns, strided
  const linalg::MatrixView part{wide.values.data(), 300, 512, 700};
  const std::map<std::string, linalg::MatrixView> views = {
      {"P", linalg::MatrixView(p)}, {"A", linalg::MatrixView(a)}, {"W", part}};
  const std::map<std::string, expr::Shape> shapes = {{"P", {600, 600}}, {"A", {300, 256}}, {"W", {300, 512}}};
  for (const std::string text : {"P^2", "A' * A", "W' * W + W' * W"}) {
    SCOPED_TRACE(text);
    Result<expr::Expr> e = expr::parse(text, shapes);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    Result<linalg::Matrix> local = expr::evaluate(*e, views);
    ASSERT_TRUE(local.is_ok()) << local.status().to_string();
    session::EvalOptions options;
    options.tile = 256;
    options.multiply.verify = multiply::VerifyMode::kExact;
    Result<expr::EvalOutcome> outcome = session->evaluate(*e, views, options);
    ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
    EXPECT_EQ(outcome->value.values, local->values);
    EXPECT_TRUE(outcome->scheduled->verification.passed) << outcome->scheduled->verification.detail;
  }
}

// The scheduled report's figures add up: every task ran once on a node that took part, the kinds
// count every task, tiles moved stay below returning every intermediate, and free transfers are
// never slower than real ones.
TEST_F(EvalTest, TheScheduledReportAddsUp) {
  Result<session::Session> session = session::Session::open(cluster_);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  const std::map<std::string, linalg::Matrix> values = {{"u", small_integers(1, 64, 1)}, {"P", small_integers(64, 64, 2)}};
  std::map<std::string, linalg::MatrixView> views;
  for (const auto& [name, m] : values) views.emplace(name, linalg::MatrixView(m));
  for (const std::string text : {"u * P^6", "P^4", "P^2 + 2 * P - P'"}) {
    SCOPED_TRACE(text);
    Result<expr::Expr> e = expr::parse(text, {{"u", {1, 64}}, {"P", {64, 64}}});
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    session::EvalOptions options;
    options.tile = 16;
    Result<expr::EvalOutcome> outcome = session->evaluate(*e, views, options);
    ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
    const expr::ScheduledEval& run = *outcome->scheduled;
    uint64_t node_tasks = 0, kind_tasks = 0;
    for (const expr::ScheduledNode& node : run.nodes) node_tasks += node.tasks;
    for (const expr::ScheduledTaskKind& kind : run.kinds) kind_tasks += kind.tasks;
    EXPECT_EQ(node_tasks, run.tasks);
    EXPECT_EQ(kind_tasks, run.tasks);
    EXPECT_EQ(run.nodes.size(), 3u);
    EXPECT_GT(run.measured_bytes, 0.0);
    EXPECT_LT(run.measured_bytes, run.naive_bytes);
    EXPECT_LE(run.theoretical_makespan_s, run.predicted_makespan_s + 1e-12);
    EXPECT_GE(run.fastest_alone_s + 1e-12, run.theoretical_makespan_s);
    EXPECT_GT(run.measured_makespan_s, 0.0);
    EXPECT_EQ(run.attempts, 1u);
    EXPECT_TRUE(run.lost_nodes.empty());
    EXPECT_TRUE(run.verification.passed) << run.verification.detail;
    // The timeline: every task, each sent before it was done, done by the end, forecast in order.
    ASSERT_EQ(run.timeline.size(), run.tasks);
    for (const expr::ScheduledTaskTiming& task : run.timeline) {
      EXPECT_GE(task.sent_s, 0.0) << task.node << " " << task.kind;
      EXPECT_GE(task.done_s, task.sent_s) << task.node << " " << task.kind;
      EXPECT_LE(task.done_s, run.measured_makespan_s + 1e-9);
      EXPECT_LE(task.predicted_start_s, task.predicted_finish_s);
    }
    EXPECT_NE(expr::eval_report_json(*outcome).find("\"timeline\""), std::string::npos);
  }
  // On one named node alone: it does every task; a name that is not in the cluster is refused.
  Result<expr::Expr> e = expr::parse("P^4", {{"P", {64, 64}}});
  ASSERT_TRUE(e.is_ok());
  session::EvalOptions alone;
  alone.tile = 16;
  alone.only_nodes = {"b"};
  Result<expr::EvalOutcome> outcome = session->evaluate(*e, views, alone);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
  ASSERT_EQ(outcome->scheduled->nodes.size(), 1u);
  EXPECT_EQ(outcome->scheduled->nodes[0].name, "b");
  EXPECT_EQ(outcome->scheduled->nodes[0].tasks, outcome->scheduled->tasks);
  alone.only_nodes = {"zz"};
  Result<expr::EvalOutcome> unknown = session->evaluate(*e, views, alone);
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("'zz'"), std::string::npos) << unknown.status().to_string();
}

// Tiles one node computed go straight to the nodes that read them: the value is exact either way,
// the nodes report the bytes they sent each other, and the coordinator sends less than when every
// such tile passes through it.
TEST_F(EvalTest, TilesGoWorkerToWorkerAndTheCoordinatorSendsLess) {
  Result<session::Session> session = session::Session::open(cluster_);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  // Tiles of 256: each task's compute outweighs moving a tile, so every node gets tasks whatever
  // the profile says of latency (with 16-square tiles one node can be forecast to do it all).
  const linalg::Matrix p = small_integers(768, 768, 31);
  const std::map<std::string, linalg::MatrixView> views = {{"P", linalg::MatrixView(p)}};
  Result<expr::Expr> e = expr::parse("P^4 + P^2", {{"P", {768, 768}}});
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  Result<linalg::Matrix> local = expr::evaluate(*e, views);
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  std::map<bool, expr::ScheduledEval> runs;
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct" : "through the coordinator");
    session::EvalOptions options;
    options.tile = 256;
    options.every_node = true;
    options.tile_route = direct ? expr::TileRoute::kDirect : expr::TileRoute::kCoordinator;
    options.multiply.verify = multiply::VerifyMode::kExact;
    Result<expr::EvalOutcome> outcome = session->evaluate(*e, views, options);
    ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
    EXPECT_EQ(outcome->value.values, local->values);
    runs[direct] = *outcome->scheduled;
    EXPECT_EQ(runs[direct].tile_route, direct ? "direct" : "coordinator");
    EXPECT_TRUE(runs[direct].route_notes.empty()) << runs[direct].route_notes.front();
    uint64_t peer_bytes = 0;
    for (const expr::ScheduledNode& node : runs[direct].nodes) peer_bytes += node.peer_bytes_sent;
    if (direct) {
      EXPECT_GT(peer_bytes, 0u);
    } else {
      EXPECT_EQ(peer_bytes, 0u);
    }
    EXPECT_NE(expr::eval_report_json(*outcome).find("\"coordinator_bytes_sent\""), std::string::npos);
  }
  EXPECT_LT(runs[true].coordinator_bytes_sent, runs[false].coordinator_bytes_sent);
  // auto (the default): both routes scheduled, the one forecast sooner runs, and the report says so.
  session::EvalOptions options;
  options.tile = 256;
  options.every_node = true;
  options.multiply.verify = multiply::VerifyMode::kExact;
  Result<expr::EvalOutcome> outcome = session->evaluate(*e, views, options);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
  EXPECT_EQ(outcome->value.values, local->values);
  ASSERT_EQ(outcome->scheduled->route_notes.size(), 1u);
  const std::string& note = outcome->scheduled->route_notes[0];
  EXPECT_NE(note.find(outcome->scheduled->tile_route == "direct" ? "tiles between nodes worker to worker: forecast"
                                                                  : "tiles between nodes through the coordinator: forecast"),
            std::string::npos)
      << note;
}

// A link between two workers that fails (here: one node told to reach another at an address nobody
// listens on) is not a lost node: the same nodes run again with every tile through the
// coordinator, the value exact, and the report says why.
TEST_F(EvalTest, AFailedLinkBetweenWorkersRunsAgainThroughTheCoordinator) {
  // Equal figures, so tasks are spread and some tile must go worker to worker (a quick profile of a
  // loaded machine could make one node look fast enough to take every task, moving nothing).
  ASSERT_NO_FATAL_FAILURE(save_profile_with_every_node_like_the_first(cluster_));
  session::SessionOptions session_options;
  const std::size_t count = cluster_.nodes.size();
  session_options.peer_hosts.assign(count, std::vector<std::string>(count));
  for (std::size_t from = 0; from < count; ++from) {
    for (std::size_t to = 0; to < count; ++to) session_options.peer_hosts[from][to] = "127.0.0.2";  // refused
  }
  Result<session::Session> session = session::Session::open(cluster_, session_options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  const linalg::Matrix p = small_integers(768, 768, 32);  // 256 tiles: every node gets tasks
  const std::map<std::string, linalg::MatrixView> views = {{"P", linalg::MatrixView(p)}};
  Result<expr::Expr> e = expr::parse("P^4", {{"P", {768, 768}}});
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  Result<linalg::Matrix> local = expr::evaluate(*e, views);
  ASSERT_TRUE(local.is_ok());
  session::EvalOptions options;
  options.tile = 256;
  options.every_node = true;
  options.tile_route = expr::TileRoute::kDirect;
  options.multiply.verify = multiply::VerifyMode::kExact;
  std::vector<std::string> notices;
  session::RunControl control;
  control.on_notice = [&](const std::string& notice) { notices.push_back(notice); };
  Result<expr::EvalOutcome> outcome = session->evaluate(*e, views, options, control);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
  EXPECT_EQ(outcome->value.values, local->values);
  const expr::ScheduledEval& run = *outcome->scheduled;
  EXPECT_EQ(run.attempts, 2u);
  EXPECT_TRUE(run.lost_nodes.empty());
  EXPECT_EQ(run.tile_route, "coordinator");
  // One notice says why (another may say a quick profile is measured first).
  const auto failed = std::find_if(notices.begin(), notices.end(),
                                   [](const std::string& notice) { return notice.find("could not send tile") != std::string::npos; });
  ASSERT_NE(failed, notices.end()) << fmt::format("{}", fmt::join(notices, " | "));
  EXPECT_NE(failed->find("127.0.0.2"), std::string::npos) << *failed;
  EXPECT_NE(failed->find("running again with every tile through the coordinator"), std::string::npos) << *failed;
  ASSERT_EQ(run.route_notes.size(), 1u);
  EXPECT_EQ(run.route_notes[0], *failed);
}

TEST_F(EvalTest, TheCliWritesTheResultAndAReportAndRefusesBadExpressionsByColumn) {
  const std::string config = testing::write_cluster_file(dir_, cluster_);
  const std::string cli = std::string(TESSERA_CLI_BINARY) + " eval " + config + " ";
  const testing::CommandResult run =
      testing::run_command(cli + "'u * P^4' --mode sequence --input u=integers:1x64 --input P=integers:64x64 --explain --out " +
                           dir_.file("r.npy") + " --report " + dir_.file("r.json") + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("expression: u * P^4  (1x64)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("before: u * P^4"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("total: 4 products on the cluster"), std::string::npos) << run.output;
  Result<linalg::Matrix> written = linalg::read_npy(dir_.file("r.npy"));
  ASSERT_TRUE(written.is_ok()) << written.status().to_string();
  EXPECT_EQ(written->rows, 1u);
  EXPECT_EQ(written->cols, 64u);
  const nlohmann::json report = nlohmann::json::parse(testing::read_file(dir_.file("r.json")));
  EXPECT_EQ(report["products"].size(), 4u);
  for (const auto& product : report["products"]) EXPECT_EQ(product["verified"], true);

  // Scheduled (the default): the schedule's figures, the value verified, the JSON's scheduled part.
  const testing::CommandResult scheduled = testing::run_command(
      cli + "'P^3 + P' --tile 32 --input P=integers:64x64 --report " + dir_.file("s.json") + " 2>&1");
  ASSERT_EQ(scheduled.exit_code, 0) << scheduled.output;
  EXPECT_NE(scheduled.output.find("schedule: "), std::string::npos) << scheduled.output;
  EXPECT_NE(scheduled.output.find("tile tasks of 32 x 32"), std::string::npos) << scheduled.output;
  EXPECT_NE(scheduled.output.find("verified: yes"), std::string::npos) << scheduled.output;
  const nlohmann::json scheduled_report = nlohmann::json::parse(testing::read_file(dir_.file("s.json")));
  EXPECT_EQ(scheduled_report["mode"], "scheduled");
  EXPECT_EQ(scheduled_report["scheduled"]["tile"], 32);
  EXPECT_EQ(scheduled_report["scheduled"]["verified"], true);
  EXPECT_EQ(scheduled_report["scheduled"]["nodes"].size(), 3u);
  for (const std::string flags : {"--mode bogus", "--nodes a,zz", "--cache-mb -1"}) {
    const testing::CommandResult refused = testing::run_command(cli + "'P * P' --input P=random:8x8 " + flags + " 2>&1");
    EXPECT_EQ(refused.exit_code, 2) << flags << ": " << refused.output;
  }

  const testing::CommandResult misshapen =
      testing::run_command(cli + "'P * u' --input u=random:1x8 --input P=random:8x8 2>&1");
  EXPECT_EQ(misshapen.exit_code, 2) << misshapen.output;
  EXPECT_NE(misshapen.output.find("column 3: cannot multiply 8x8 by 1x8"), std::string::npos) << misshapen.output;
  const testing::CommandResult missing =
      testing::run_command(cli + "'P * P' --input P=" + dir_.file("absent.npy") + " 2>&1");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("absent.npy"), std::string::npos) << missing.output;
  const testing::CommandResult unknown = testing::run_command(cli + "'P * Q' --input P=random:4x4 2>&1");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("no input named Q"), std::string::npos) << unknown.output;
}

// A node lost in the middle of a scheduled DAG, killed or stopped: the tiles it held and the tasks
// it had are computed again on the others, and the value is still exact. Worker c answers every
// job 30 ms late (the faulty twin), so the run lasts long enough to lose it in the middle.
class ScheduledLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::LocalCluster started =
        testing::start_local_cluster("eval-loss", "eval-secret", 3, dir_, "", {"--fault-delay-credits-ms", "30"});
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  // Evaluates P^4 (64 x 64, 16 x 16 tiles: 32 tasks, 128 jobs) while `fault` is done to worker c
  // 400 ms in, tiles between nodes taking `route`, and checks the value against the local one.
  void expect_exact_despite(int signal, double node_timeout_s, expr::TileRoute route) {
    // Every node given a's figures: HEFT then spreads the tasks evenly, so c has work when the fault
    // comes however the profile read a loaded machine (c's own delayed credits make its link look slow).
    ASSERT_NO_FATAL_FAILURE(save_profile_with_every_node_like_the_first(cluster_));
    Result<session::Session> session = session::Session::open(cluster_);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    const linalg::Matrix p = small_integers(64, 64, 2);
    const std::map<std::string, linalg::MatrixView> views = {{"P", linalg::MatrixView(p)}};
    Result<expr::Expr> e = expr::parse("P^4", {{"P", {64, 64}}});
    ASSERT_TRUE(e.is_ok());
    Result<linalg::Matrix> local = expr::evaluate(*e, views);
    ASSERT_TRUE(local.is_ok());
    session::EvalOptions options;
    options.tile = 16;
    options.every_node = true;  // c must have tasks to lose, however the forecasts compare
    options.multiply.verify = multiply::VerifyMode::kExact;
    options.multiply.node_timeout_s = node_timeout_s;
    options.tile_route = route;
    const int victim = workers_[2]->pid();
    std::jthread fault([victim, signal] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      ::kill(victim, signal);
    });
    Result<expr::EvalOutcome> outcome = session->evaluate(*e, views, options);
    fault.join();
    if (signal == SIGSTOP) ::kill(victim, SIGCONT);
    ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
    EXPECT_EQ(outcome->value.values, local->values);
    const expr::ScheduledEval& run = *outcome->scheduled;
    EXPECT_EQ(run.lost_nodes, std::vector<std::string>{"c"});
    EXPECT_EQ(run.attempts, 2u);
    uint64_t peer_bytes = 0;
    for (const expr::ScheduledNode& node : run.nodes) peer_bytes += node.peer_bytes_sent;
    EXPECT_EQ(peer_bytes > 0, route == expr::TileRoute::kDirect) << "tiles went the route asked for";
    EXPECT_TRUE(run.verification.passed) << run.verification.detail;
  }

  TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

TEST_F(ScheduledLossTest, AKilledNodesTasksAreComputedAgainOnTheOthers) {
  expect_exact_despite(SIGKILL, 0.0, expr::TileRoute::kCoordinator);
}

TEST_F(ScheduledLossTest, AStoppedNodeIsDroppedAfterItsDeadline) {
  expect_exact_despite(SIGSTOP, 1.0, expr::TileRoute::kCoordinator);
}

// The same with tiles sent worker to worker: c is killed or frozen while it sends or receives
// them; only c is lost (a node sending to a frozen c is not taken for silent).
TEST_F(ScheduledLossTest, AKilledNodeAmongWorkerToWorkerTilesIsTheOnlyOneLost) {
  expect_exact_despite(SIGKILL, 0.0, expr::TileRoute::kDirect);
}

TEST_F(ScheduledLossTest, AStoppedNodeAmongWorkerToWorkerTilesIsTheOnlyOneLost) {
  expect_exact_despite(SIGSTOP, 1.0, expr::TileRoute::kDirect);
}

// Left out by name (the others evaluate it), or with --require-all refused by name.
TEST_F(EvalTest, AnAbsentNodeIsNamed) {
  workers_.back().reset();  // stops worker c by its pid
  const std::string config = testing::write_cluster_file(dir_, cluster_);
  const std::string command =
      std::string(TESSERA_CLI_BINARY) + " eval " + config + " 'P * P' --input P=random:16x16";
  const testing::CommandResult run = testing::run_command(command + " 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("warning: node 'c' left out"), std::string::npos) << run.output;
  const testing::CommandResult refused = testing::run_command(command + " --require-all 2>&1");
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("node 'c'"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace tessera::balance
