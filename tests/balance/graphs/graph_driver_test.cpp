// The graph driver's pure logic, without workers: the termination detector (also against a
// simulated message system read by staggered polls), the sync batch bookkeeping, target weights,
// modes, tolerances and peer endpoints.
#include "tessera/balance/graphs/termination.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <limits>
#include <random>

#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/balance/graphs/peers.hpp"
#include "tessera/balance/graphs/priority_levels.hpp"

namespace tessera::balance {
namespace {

std::vector<graphs::NodeCounters> quiet_poll() {
  // Three nodes, 10 batches sent and received in all, tiny residual.
  return {{100, 4, 3, 1e-8}, {50, 3, 3, 2e-8}, {70, 3, 4, 0.0}};
}

// --- Priority levels -------------------------------------------------------------------------

TEST(PriorityLevels, EachNodeGetsTheOthersResidualAsBaseAndItsOwnAtTheSameRate) {
  graphs::PriorityLevels levels(0.5, 1000, 1e-6);
  const auto now = std::chrono::steady_clock::now();
  const std::vector<graphs::NodeCounters> poll = {{10, 0, 0, 0.3}, {20, 0, 0, 0.1}};
  const std::vector<graph::PriorityLevel> first = levels.observe(poll, now);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_DOUBLE_EQ(first[0].per_residual, 0.5 / 1000);
  EXPECT_DOUBLE_EQ(first[0].base, 0.5 * 0.1 / 1000);  // the other node's residual
  EXPECT_DOUBLE_EQ(first[1].base, 0.5 * 0.3 / 1000);
  EXPECT_EQ(first[0].base_decay, 0.0);  // no earlier poll to measure a rate from
  // The whole residual fell from 0.4 to 0.1 in 50 ms: the others' part decays at ln 4 / 0.05 s.
  const std::vector<graph::PriorityLevel> second =
      levels.observe(std::vector<graphs::NodeCounters>{{30, 0, 0, 0.05}, {40, 0, 0, 0.05}}, now + std::chrono::milliseconds(50));
  EXPECT_NEAR(second[0].base_decay, std::log(4.0) / 0.05, 1e-6);
  EXPECT_DOUBLE_EQ(second[1].base, 0.5 * 0.05 / 1000);
}

TEST(PriorityLevels, ANodeAloneIsNeverHeldBackByOthers) {
  graphs::PriorityLevels levels(1.0, 64, 1e-6);
  const std::vector<graph::PriorityLevel> level =
      levels.observe(std::vector<graphs::NodeCounters>{{5, 0, 0, 2.0}}, std::chrono::steady_clock::now());
  EXPECT_EQ(level[0].base, 0.0);
  EXPECT_DOUBLE_EQ(level[0].per_residual, 1.0 / 64);
}

TEST(PriorityLevels, ALevelIsLiftedWhenNothingMovedWithWorkLeft) {
  graphs::PriorityLevels levels(0.5, 100, 1e-6);
  const auto now = std::chrono::steady_clock::now();
  const std::vector<graphs::NodeCounters> poll = {{7, 1, 1, 0.2}, {9, 1, 1, 0.2}};
  EXPECT_NE(levels.observe(poll, now)[0], graph::PriorityLevel{});
  // Same update counts a poll later, residual still above the tolerance: every engine waits.
  for (const graph::PriorityLevel& level : levels.observe(poll, now + std::chrono::milliseconds(5))) {
    EXPECT_EQ(level, graph::PriorityLevel{});
  }
  // Below the tolerance nothing needs lifting (the run is about to end).
  const std::vector<graphs::NodeCounters> done = {{7, 1, 1, 1e-7}, {9, 1, 1, 1e-7}};
  levels.reset();
  levels.observe(done, now);
  EXPECT_NE(levels.observe(done, now + std::chrono::milliseconds(5))[0], graph::PriorityLevel{});
}

TEST(PriorityLevels, FractionZeroTurnsThemOff) {
  graphs::PriorityLevels levels(0.0, 100, 1e-6);
  for (const graph::PriorityLevel& level :
       levels.observe(std::vector<graphs::NodeCounters>{{1, 0, 0, 0.5}, {2, 0, 0, 0.5}}, std::chrono::steady_clock::now())) {
    EXPECT_EQ(level, graph::PriorityLevel{});
  }
}

TEST(Termination, TwoStablePollsTerminate) {
  graphs::TerminationDetector detector(1e-6);
  EXPECT_FALSE(detector.observe(quiet_poll()));
  EXPECT_EQ(detector.waiting_for(), "first poll");
  EXPECT_TRUE(detector.observe(quiet_poll()));
}

TEST(Termination, NeverWithBatchesInFlight) {
  std::vector<graphs::NodeCounters> poll = quiet_poll();
  poll[1].batches_sent += 1;  // one batch left node 1 and has not arrived anywhere
  graphs::TerminationDetector detector(1e-6);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(detector.observe(poll));
  EXPECT_EQ(detector.waiting_for(), "1 batches in flight");
}

TEST(Termination, NeverWhenCountersMovedBetweenPolls) {
  // Both polls balance, but a batch was sent and received between them: it may have revived
  // its receiver after that node was read.
  std::vector<graphs::NodeCounters> later = quiet_poll();
  later[0].batches_sent += 1;
  later[2].batches_received += 1;
  std::string why;
  EXPECT_FALSE(graphs::proves_termination(quiet_poll(), later, 1e-6, &why));
  EXPECT_EQ(why, "batch counters moved between polls");
}

TEST(Termination, NeverWhileAnEngineUpdates) {
  std::vector<graphs::NodeCounters> later = quiet_poll();
  later[2].updates += 1;
  std::string why;
  EXPECT_FALSE(graphs::proves_termination(quiet_poll(), later, 1e-6, &why));
  EXPECT_EQ(why, "node 2 is still updating");
}

TEST(Termination, NeverWithTheResidualOverTheTolerance) {
  std::vector<graphs::NodeCounters> poll = quiet_poll();
  poll[0].residual = 2e-6;
  std::string why;
  EXPECT_FALSE(graphs::proves_termination(poll, poll, 1e-6, &why));
  EXPECT_EQ(why.rfind("residual", 0), 0u) << why;
  // cc/sssp: tolerance 0, one pending vertex anywhere is enough to go on.
  std::vector<graphs::NodeCounters> pending = quiet_poll();
  for (graphs::NodeCounters& node : pending) node.residual = 0.0;
  EXPECT_TRUE(graphs::proves_termination(pending, pending, 0.0));
  pending[1].residual = 1.0;
  EXPECT_FALSE(graphs::proves_termination(pending, pending, 0.0));
  // NaN never passes.
  pending[1].residual = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(graphs::proves_termination(pending, pending, 1e-6));
}

TEST(Termination, ResetAndAChangedNodeSetStartAfresh) {
  graphs::TerminationDetector detector(1e-6);
  EXPECT_FALSE(detector.observe(quiet_poll()));
  detector.reset();
  EXPECT_FALSE(detector.observe(quiet_poll()));
  const std::vector<graphs::NodeCounters> three = quiet_poll();
  std::vector<graphs::NodeCounters> two(three.begin(), three.begin() + 2);
  two[0].batches_received = 4;  // balanced among two nodes
  EXPECT_FALSE(detector.observe(two));
  EXPECT_EQ(detector.waiting_for(), "first poll");
  EXPECT_TRUE(detector.observe(two));
}

TEST(Termination, OneNodeNeedsNoBatches) {
  const std::vector<graphs::NodeCounters> poll = {{12, 0, 0, 0.0}};
  EXPECT_TRUE(graphs::proves_termination(poll, poll, 0.0));
}

// A message system like the engines': nodes with pending work (cc-style counts, tolerance 0),
// an update consumes one unit and may send a batch carrying work to another node; batches wait
// in a channel and arrive in random order. Polls read the nodes one at a time with random events
// in between (and between polls). Whenever the detector says "terminated", the true system must
// be: nothing pending anywhere and nothing in the channel.
struct Simulated {
  std::vector<graphs::NodeCounters> nodes;
  std::vector<int> pending;
  std::deque<std::pair<std::size_t, int>> channel;  // (receiver, work units)
  std::mt19937_64 random;
  double spawn_probability;

  Simulated(std::size_t count, uint64_t seed, double spawn) : nodes(count), pending(count, 0), random(seed),
                                                                spawn_probability(spawn) {
    for (std::size_t i = 0; i < count; ++i) {
      pending[i] = static_cast<int>(random() % 5);
      nodes[i].residual = pending[i];
    }
  }

  bool finished() const {
    if (!channel.empty()) return false;
    for (int work : pending) {
      if (work != 0) return false;
    }
    return true;
  }

  // One random event: an update somewhere, or a delivery. False when nothing can happen.
  bool step() {
    std::vector<std::size_t> busy;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      if (pending[i] > 0) busy.push_back(i);
    }
    const bool can_deliver = !channel.empty();
    if (busy.empty() && !can_deliver) return false;
    if (can_deliver && (busy.empty() || random() % 2 == 0)) {
      const std::size_t pick = random() % channel.size();
      const auto [receiver, work] = channel[pick];
      channel.erase(channel.begin() + static_cast<std::ptrdiff_t>(pick));
      nodes[receiver].batches_received += 1;
      pending[receiver] += work;
      nodes[receiver].residual = pending[receiver];
      return true;
    }
    const std::size_t node = busy[random() % busy.size()];
    pending[node] -= 1;
    nodes[node].updates += 1;
    if (std::uniform_real_distribution<double>(0.0, 1.0)(random) < spawn_probability) {
      const std::size_t receiver = random() % nodes.size();
      nodes[node].batches_sent += 1;
      channel.push_back({receiver, 1 + static_cast<int>(random() % 2)});
    }
    nodes[node].residual = pending[node];
    return true;
  }

  // Reads every node in order with up to `max_events` random events between reads.
  std::vector<graphs::NodeCounters> staggered_poll(int max_events) {
    std::vector<graphs::NodeCounters> poll;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      for (int e = static_cast<int>(random() % static_cast<uint64_t>(max_events + 1)); e > 0; --e) (void)step();
      poll.push_back(nodes[i]);
    }
    return poll;
  }
};

TEST(Termination, StaggeredPollsOfASimulatedSystemNeverTerminateEarly) {
  int terminated_runs = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    for (std::size_t count : {1u, 2u, 3u, 7u}) {
      Simulated system(count, seed * 31 + count, 0.6);
      graphs::TerminationDetector detector(0.0);
      bool terminated = false;
      for (int poll = 0; poll < 2000 && !terminated; ++poll) {
        terminated = detector.observe(system.staggered_poll(8));
        if (terminated) {
          ASSERT_TRUE(system.finished()) << "seed " << seed << ", " << count << " nodes, poll " << poll;
        }
        for (int e = static_cast<int>(system.random() % 4); e > 0; --e) (void)system.step();
      }
      terminated_runs += terminated ? 1 : 0;
    }
  }
  // The detector must also finish: every run here settles within a few hundred events.
  EXPECT_EQ(terminated_runs, 300 * 4);
}

TEST(SyncLedger, ExpectedBatchesAreWhatTheOthersSent) {
  // sent_to[j][i]: node j sent that many batches to node i in the last step.
  const std::vector<std::vector<uint64_t>> sent_to = {{9, 2, 0}, {1, 9, 4}, {3, 5, 9}};
  EXPECT_EQ(graphs::expected_batches(sent_to), (std::vector<uint64_t>{4, 7, 4}));
  // Short rows count as zeros.
  const std::vector<std::vector<uint64_t>> ragged = {{0, 1}, {}, {2}};
  EXPECT_EQ(graphs::expected_batches(ragged), (std::vector<uint64_t>{2, 1, 0}));
}

TEST(SyncLedger, StepsAccumulateTheTotalsEachNodeMustReceive) {
  graphs::SyncLedger ledger(2);
  EXPECT_EQ(ledger.expected_next(), (std::vector<uint64_t>{0, 0}));
  ledger.record_step(std::vector<std::vector<uint64_t>>{{0, 3}, {1, 0}});
  EXPECT_EQ(ledger.expected_next(), (std::vector<uint64_t>{1, 3}));
  ledger.record_step(std::vector<std::vector<uint64_t>>{{0, 2}, {0, 0}});
  EXPECT_EQ(ledger.expected_next(), (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(ledger.received_total(), (std::vector<uint64_t>{1, 5}));
}

TEST(TargetWeights, ParsesTheThreeForms) {
  Result<graphs::TargetWeights> equal = graphs::parse_target_weights("equal");
  ASSERT_TRUE(equal) << equal.status().message();
  EXPECT_EQ(equal->source, graphs::TargetWeights::Source::kEqual);
  Result<graphs::TargetWeights> profile = graphs::parse_target_weights("profile");
  ASSERT_TRUE(profile);
  EXPECT_EQ(profile->source, graphs::TargetWeights::Source::kProfile);
  Result<graphs::TargetWeights> numbers = graphs::parse_target_weights("4,1,0.5,0");
  ASSERT_TRUE(numbers) << numbers.status().message();
  EXPECT_EQ(numbers->source, graphs::TargetWeights::Source::kExplicit);
  EXPECT_EQ(numbers->weights, (std::vector<double>{4, 1, 0.5, 0}));
  EXPECT_EQ(describe(*numbers), "explicit 4,1,0.5,0");
}

TEST(TargetWeights, RefusesWhatIsNotAWeightList) {
  for (const char* text : {"", "fast", "1,,2", "1,2,", "-1,2", "0,0", "inf,1", "nan", "1;2", "2x"}) {
    Result<graphs::TargetWeights> parsed = graphs::parse_target_weights(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("profile, equal or one number per node"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(GraphOptions, ModesAndTolerances) {
  EXPECT_EQ(*graphs::parse_graph_mode("async"), graphs::GraphMode::kAsync);
  EXPECT_EQ(*graphs::parse_graph_mode("sync"), graphs::GraphMode::kSync);
  Result<graphs::GraphMode> bad = graphs::parse_graph_mode("jacobi");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("async or sync"), std::string::npos);

  graph::AlgorithmSpec pagerank;
  EXPECT_EQ(*graphs::run_tolerance(pagerank, std::nullopt), graphs::kDefaultGraphTolerance);
  EXPECT_EQ(*graphs::run_tolerance(pagerank, 1e-9), 1e-9);
  for (double bad_tolerance : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    EXPECT_FALSE(graphs::run_tolerance(pagerank, bad_tolerance)) << bad_tolerance;
  }
  graph::AlgorithmSpec components;
  components.kind = graph::AlgorithmKind::kConnectedComponents;
  EXPECT_EQ(*graphs::run_tolerance(components, 1e-3), 0.0);  // cc and sssp stop with nothing pending
}

// A graph read from an empty file is refused naming the file; an unnamed one is "the graph".
TEST(GraphChecks, AGraphWithoutVerticesIsRefusedByName) {
  const graphdata::DirectedGraph empty;
  const graph::AlgorithmSpec pagerank;
  const Status named = graphs::check_graph_run(empty, pagerank, "data/empty.edges");
  EXPECT_EQ(named.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(named.message(), "data/empty.edges has no vertices, so there is nothing to compute; give a graph with at "
                             "least one edge (a line 'U V' in an edge list)");
  EXPECT_EQ(graphs::check_graph_run(empty, pagerank).message().rfind("the graph has no vertices", 0), 0u);
  EXPECT_EQ(graphs::check_graph_run(empty, pagerank, "e\x1b[2J.edges").message().rfind("e\\x1b[2J.edges has", 0), 0u);
}

std::vector<cluster::NodeSpec> three_nodes() {
  std::vector<cluster::NodeSpec> nodes(3);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].name = std::string(1, static_cast<char>('a' + i));
    nodes[i].host = "10.0.0." + std::to_string(i + 1);
    nodes[i].port = static_cast<uint16_t>(7000 + i);
  }
  return nodes;
}

TEST(PeerEndpoints, OrdinaryClustersUseTheSpecHosts) {
  const std::vector<cluster::NodeSpec> nodes = three_nodes();
  const std::vector<std::size_t> parts = {2, 0};  // part 0 on node c, part 1 on node a
  Result<std::vector<std::vector<graph::PeerEndpoint>>> peers = graphs::peer_endpoints(nodes, {}, parts);
  ASSERT_TRUE(peers) << peers.status().message();
  ASSERT_EQ(peers->size(), 2u);
  const std::vector<graph::PeerEndpoint> expected = {{"10.0.0.3", 7002}, {"10.0.0.1", 7000}};
  EXPECT_EQ((*peers)[0], expected);
  EXPECT_EQ((*peers)[1], expected);
}

TEST(PeerEndpoints, AHostMatrixIsReadPerReceiver) {
  const std::vector<cluster::NodeSpec> nodes = three_nodes();
  const graphs::PeerHosts hosts = {{"self", "a->b", "a->c"}, {"b->a", "self", "b->c"}, {"c->a", "c->b", "self"}};
  const std::vector<std::size_t> parts = {1, 2};
  Result<std::vector<std::vector<graph::PeerEndpoint>>> peers = graphs::peer_endpoints(nodes, hosts, parts);
  ASSERT_TRUE(peers) << peers.status().message();
  EXPECT_EQ((*peers)[0], (std::vector<graph::PeerEndpoint>{{"self", 7001}, {"b->c", 7002}}));
  EXPECT_EQ((*peers)[1], (std::vector<graph::PeerEndpoint>{{"c->b", 7001}, {"self", 7002}}));
}

TEST(PeerEndpoints, RefusesAMatrixOfTheWrongShapeOrANodeOutOfRange) {
  const std::vector<cluster::NodeSpec> nodes = three_nodes();
  const std::vector<std::size_t> parts = {0, 1, 2};
  EXPECT_FALSE(graphs::peer_endpoints(nodes, graphs::PeerHosts{{"x", "y", "z"}}, parts));
  EXPECT_FALSE(graphs::peer_endpoints(nodes, graphs::PeerHosts(3, std::vector<std::string>(2, "x")), parts));
  const std::vector<std::size_t> outside = {0, 3};
  EXPECT_FALSE(graphs::peer_endpoints(nodes, {}, outside));
}

}  // namespace
}  // namespace tessera::balance
