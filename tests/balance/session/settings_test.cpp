#include "tessera/balance/session/settings.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/eval_command.hpp"
#include "tessera/cli/graph_command.hpp"
#include "tessera/cli/partition_command.hpp"
#include "tessera/linalg/matrix.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::balance::session {
namespace {

// The CLI's spelling, and Python's (python/src/cluster_handle.cpp, which a C++ test cannot link;
// tests/python checks its messages as Python raises them) repeated.
const OptionSpelling& kFlags = cli::flag_spelling();
const OptionSpelling kKeywords(OptionSpelling::Style::kKeyword, {{"node_timeout_s", "node_timeout"}});

graphdata::DirectedGraph settings_test_graph() {
  Result<graphdata::DirectedGraph> graph = graphdata::generate_directed_graph("rmat:5", 1);
  EXPECT_TRUE(graph.is_ok()) << graph.status().message();
  return std::move(*graph);
}

TEST(FrontEndSettings, TheCliReadsTheOneDefinitionOfEveryDefault) {
  // Python reads session::MultiplySettings{} and GraphSettings{} for its keyword defaults (its
  // pytest test_option_defaults.py checks the signatures); the CLI's commands hold the same structs.
  EXPECT_EQ(cli::MultiplyCommand{}.settings, MultiplySettings{});
  EXPECT_EQ(cli::MultiplyCommand{}.overlap, MultiplySettings{}.overlap ? "on" : "off");
  EXPECT_EQ(cli::GraphCommand{}.settings, GraphSettings{});
  EXPECT_EQ(cli::ModelCommand{}.panel_width, MultiplySettings{}.panel_width);
  EXPECT_EQ(cli::ModelCommand{}.panels_in_flight, MultiplySettings{}.panels_in_flight);
  EXPECT_EQ(cli::EvalCommand{}.settings, EvalSettings{});
  EXPECT_EQ(EvalSettings{}.policy, MultiplySettings{}.policy);
  EXPECT_EQ(EvalSettings{}.verify, MultiplySettings{}.verify);
  EXPECT_EQ(cli::ProfileCommand{}.measure.reference_size, profile::ProfileOptions{}.reference_size);
  EXPECT_EQ(cli::ProfileCommand{}.measure.window_seconds, profile::ProfileOptions{}.window_seconds);
}

TEST(FrontEndSettings, ProfileChecksNameTheOptionInEachSpelling) {
  cluster::ClusterSpec cluster;
  cluster.nodes.resize(2);
  cluster.nodes[0].name = "desk";
  cluster.nodes[1].name = "pi";
  profile::ProfileOptions options;
  EXPECT_TRUE(check_profile_options(options, cluster, "lab.yaml", kFlags).is_ok());
  options.only_nodes = {"pi", "pi9"};
  EXPECT_EQ(check_profile_options(options, cluster, "lab.yaml", kFlags).message(),
            "--node pi9: no such node in lab.yaml; nodes are desk, pi");
  options = profile::ProfileOptions{};
  options.reference_size = 8;
  EXPECT_EQ(check_profile_options(options, cluster, "lab.yaml", kFlags).message(), "--probe-size must be within 16..8192");
  options = profile::ProfileOptions{};
  options.window_seconds = 60.0;
  EXPECT_EQ(check_profile_options(options, cluster, "lab.yaml", kFlags).message(),
            "--window-seconds 60 must be within 0.05..30 seconds");
}

TEST(FrontEndSettings, DefaultMultiplySettingsResolveToTheFacadesDefaults) {
  const MultiplySettings settings;
  EXPECT_EQ(settings.policy, "proportional");
  EXPECT_EQ(settings.layout, "rows");
  EXPECT_EQ(settings.verify, "freivalds");
  Result<MultiplyOptions> resolved = resolve_multiply_settings(settings, 3, "lab.yaml", kFlags);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  const auto fields = [](const MultiplyOptions& o) {
    return std::tie(o.policy, o.layout, o.panel_width, o.panels_in_flight, o.refill_threshold, o.verify,
                    o.verify_seed, o.node_timeout_s);
  };
  EXPECT_TRUE(fields(*resolved) == fields(MultiplyOptions{}));
}

TEST(FrontEndSettings, MultiplySettingsBecomeThePolicyAndQueue) {
  MultiplySettings settings;
  settings.policy = "dynamic";
  settings.tile_rows = 64;
  settings.overlap = false;
  settings.panels_in_flight = 8;
  settings.refill_threshold = 4;
  Result<MultiplyOptions> resolved = resolve_multiply_settings(settings, 2, "lab.yaml", kFlags);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->policy, plan::PolicyChoice(plan::DynamicPolicy{64}));
  // Overlap off is one panel at a time, whatever the queue depth says.
  EXPECT_EQ(resolved->panels_in_flight, 1u);
  EXPECT_EQ(resolved->refill_threshold, 1u);

  settings = MultiplySettings{};
  settings.weights = {2.0, 1.0};
  resolved = resolve_multiply_settings(settings, 2, "lab.yaml", kFlags);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->policy, plan::PolicyChoice(plan::ProportionalPolicy{{2.0, 1.0}}));
}

TEST(FrontEndSettings, OneCheckEachFrontEndSpellsItsOwnWay) {
  MultiplySettings refill;
  refill.refill_threshold = 9;
  EXPECT_EQ(resolve_multiply_settings(refill, 2, "lab.yaml", kFlags).status().message(),
            "--refill 9 must be between 1 and --panels-in-flight 4");
  EXPECT_EQ(resolve_multiply_settings(refill, 2, "lab.yaml", kKeywords).status().message(),
            "refill_threshold=9 must be between 1 and panels_in_flight=4");

  MultiplySettings queue;
  queue.panel_width = 0;
  EXPECT_EQ(resolve_multiply_settings(queue, 2, "lab.yaml", kFlags).status().message(),
            "--panel-width 0 must be between 1 and 1048576");
  queue = MultiplySettings{};
  queue.panels_in_flight = 2000;
  EXPECT_EQ(resolve_multiply_settings(queue, 2, "lab.yaml", kKeywords).status().message(),
            "panels_in_flight=2000 must be between 1 and 1024");

  MultiplySettings weights;
  weights.policy = "even";
  weights.weights = {1.0, 2.0};
  EXPECT_EQ(resolve_multiply_settings(weights, 2, "lab.yaml", kFlags).status().message(),
            "--weights applies to --policy proportional only");
  EXPECT_EQ(resolve_multiply_settings(weights, 2, "lab.yaml", kKeywords).status().message(),
            "weights applies to policy=\"proportional\" only");
  weights.policy = "proportional";
  weights.weights = {1.0, 2.0, 3.0};
  const Result<MultiplyOptions> count = resolve_multiply_settings(weights, 2, "lab.yaml", kFlags);
  EXPECT_EQ(count.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(count.status().message(), "--weights has 3 values for 2 nodes (lab.yaml); give one per node");

  MultiplySettings timeout;
  timeout.node_timeout_s = -1.0;
  EXPECT_NE(resolve_multiply_settings(timeout, 2, "lab.yaml", kFlags).status().message().find("--node-timeout -1 "),
            std::string::npos);
  EXPECT_NE(resolve_multiply_settings(timeout, 2, "lab.yaml", kKeywords).status().message().find("node_timeout=-1 "),
            std::string::npos);

  MultiplySettings policy;
  policy.policy = "fastest";
  EXPECT_NE(resolve_multiply_settings(policy, 2, "lab.yaml", kFlags).status().message().find("use one of: even"),
            std::string::npos);
  MultiplySettings layout;
  layout.policy = "dynamic";
  layout.layout = "2d";
  EXPECT_FALSE(resolve_multiply_settings(layout, 2, "lab.yaml", kFlags).is_ok());
}

TEST(FrontEndSettings, DefaultGraphSettingsResolveToTheDriversDefaults) {
  const graphdata::DirectedGraph graph = settings_test_graph();
  GraphSettings settings;
  settings.algorithm = "pagerank";
  Result<graphs::GraphRunOptions> resolved = graph_run_options(settings, graph, kFlags);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  const auto fields = [](const graphs::GraphRunOptions& o) {
    return std::tie(o.algorithm, o.mode, o.method, o.seed, o.tolerance, o.poll_interval, o.snapshot_interval,
                    o.node_timeout_s, o.max_wall_s, o.priority_level_fraction, o.engine.batch_max_age,
                    o.engine.batch_max_entries, o.engine.priority_fraction, o.verify);
  };
  EXPECT_TRUE(fields(*resolved) == fields(graphs::GraphRunOptions{}));
}

TEST(FrontEndSettings, GraphAlgorithmChecksNameTheOptionInEachSpelling) {
  const graphdata::DirectedGraph graph = settings_test_graph();
  GraphSettings katz;
  katz.algorithm = "katz";
  const std::string flag_message = graph_algorithm(katz, graph, kFlags).status().message();
  const std::string keyword_message = graph_algorithm(katz, graph, kKeywords).status().message();
  EXPECT_EQ(flag_message.rfind("katz needs --beta B below 1/lambda_max", 0), 0u) << flag_message;
  EXPECT_EQ(keyword_message.rfind("katz needs beta=B below 1/lambda_max", 0), 0u) << keyword_message;
  katz.beta = 0.01;
  katz.source = 3;
  Result<graph::AlgorithmSpec> spec = graph_algorithm(katz, graph, kFlags);
  ASSERT_TRUE(spec.is_ok()) << spec.status().message();
  EXPECT_EQ(spec->kind, graph::AlgorithmKind::kKatz);
  EXPECT_EQ(spec->beta, 0.01);
  EXPECT_EQ(spec->source, std::optional<int64_t>(3));

  GraphSettings cc;
  cc.algorithm = "cc";
  cc.label = "middle";
  EXPECT_EQ(graph_algorithm(cc, graph, kFlags).status().message(), "unknown --label \"middle\"; use max or min");
  EXPECT_EQ(graph_algorithm(cc, graph, kKeywords).status().message(), "unknown label \"middle\"; use max or min");
  cc.label = "min";
  ASSERT_TRUE(graph_algorithm(cc, graph, kFlags).is_ok());
  EXPECT_FALSE(graph_algorithm(cc, graph, kFlags)->max_label);

  EXPECT_EQ(graph_algorithm(GraphSettings{}, graph, kFlags).status().message(),
            "give --algorithm pagerank, katz, cc or sssp");
  GraphSettings bfs;
  bfs.algorithm = "bfs";
  EXPECT_NE(graph_algorithm(bfs, graph, kFlags).status().message().find("pagerank, katz, cc or sssp"),
            std::string::npos);
}

TEST(FrontEndSettings, GraphRunChecksNameTheOptionInEachSpelling) {
  const graphdata::DirectedGraph graph = settings_test_graph();
  struct Mistake {
    std::function<void(GraphSettings&)> make;
    std::string flag_message;     // the message's start, as the CLI says it
    std::string keyword_message;  // as Python says it
  };
  const std::vector<Mistake> mistakes = {
      {[](GraphSettings& s) { s.node_timeout_s = 0.0; }, "--node-timeout 0 must be between 0 and 86400 seconds",
       "node_timeout=0 must be between 0 and 86400 seconds"},
      {[](GraphSettings& s) { s.poll_ms = 0; }, "--poll-ms and --snapshot-ms must be at least 1",
       "poll_ms and snapshot_ms must be at least 1"},
      {[](GraphSettings& s) { s.tolerance = 0.0; }, "--tolerance 0 must be a number > 0, e.g. 1e-6",
       "tolerance=0 must be a number > 0, e.g. 1e-6"},
      {[](GraphSettings& s) { s.mode = "eventually"; }, "--mode: ", "mode: "},
      {[](GraphSettings& s) { s.partition = "random"; }, "--partition: ", "partition: "},
      {[](GraphSettings& s) { s.batch_entries = 0; }, "--batch-entries 0 must be between 1 and 16777216",
       "batch_entries=0 must be between 1 and 16777216"},
      {[](GraphSettings& s) { s.max_seconds = 0.0; }, "--max-seconds must be > 0", "max_seconds must be > 0"},
  };
  for (const Mistake& mistake : mistakes) {
    GraphSettings settings;
    settings.algorithm = "pagerank";
    mistake.make(settings);
    EXPECT_EQ(graph_run_options(settings, graph, kFlags).status().message().rfind(mistake.flag_message, 0), 0u)
        << graph_run_options(settings, graph, kFlags).status().message();
    EXPECT_EQ(graph_run_options(settings, graph, kKeywords).status().message().rfind(mistake.keyword_message, 0), 0u)
        << graph_run_options(settings, graph, kKeywords).status().message();
  }
  // cc and sssp ignore the tolerance (they stop with nothing pending), so it is not checked.
  GraphSettings cc;
  cc.algorithm = "cc";
  cc.tolerance = 0.0;
  EXPECT_TRUE(graph_run_options(cc, graph, kFlags).is_ok());
}

TEST(FrontEndSettings, DefaultEvalSettingsResolveToTheFacadesDefaults) {
  Result<EvalOptions> resolved = resolve_eval_settings(EvalSettings{}, "lab.yaml", kFlags);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  const EvalOptions defaults;
  EXPECT_EQ(resolved->mode, defaults.mode);
  EXPECT_EQ(resolved->rewrite, defaults.rewrite);
  EXPECT_EQ(resolved->tile, defaults.tile);
  EXPECT_EQ(resolved->every_node, defaults.every_node);
  EXPECT_EQ(resolved->cache_bytes, defaults.cache_bytes);
  EXPECT_TRUE(resolved->only_nodes.empty());
  EXPECT_EQ(resolved->multiply.verify, defaults.multiply.verify);
}

TEST(FrontEndSettings, EvalSettingsBecomeTheEvaluationsOptions) {
  EvalSettings settings;
  settings.mode = "sequence";
  settings.rewrite = false;
  settings.tile = 512;
  settings.nodes = {"desktop", "pi1"};
  settings.every_node = true;
  settings.cache_mb = 64.0;
  settings.policy = "even";
  settings.verify = "exact";
  Result<EvalOptions> resolved = resolve_eval_settings(settings, "lab.yaml", kKeywords);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->mode, EvalMode::kSequence);
  EXPECT_FALSE(resolved->rewrite);
  EXPECT_EQ(resolved->tile, 512u);
  EXPECT_EQ(resolved->only_nodes, settings.nodes);
  EXPECT_TRUE(resolved->every_node);
  EXPECT_DOUBLE_EQ(resolved->cache_bytes, 64e6);
  EXPECT_TRUE(std::holds_alternative<plan::EvenPolicy>(resolved->multiply.policy));
  EXPECT_EQ(resolved->multiply.verify, multiply::VerifyMode::kExact);
}

TEST(FrontEndSettings, EvalChecksNameTheOptionInEachSpelling) {
  EvalSettings bad_mode;
  bad_mode.mode = "bogus";
  EvalSettings bad_cache;
  bad_cache.cache_mb = -1.0;
  EvalSettings bad_policy;
  bad_policy.policy = "fastest";
  for (const OptionSpelling* spelling : {&kFlags, &kKeywords}) {
    const Status mode = resolve_eval_settings(bad_mode, "lab.yaml", *spelling).status();
    EXPECT_EQ(mode.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(mode.message().find(spelling->name("mode") + ": "), std::string::npos) << mode.message();
    const Status cache = resolve_eval_settings(bad_cache, "lab.yaml", *spelling).status();
    EXPECT_NE(cache.message().find(spelling->assignment("cache_mb", "-1") + " must be a positive number"),
              std::string::npos)
        << cache.message();
    EXPECT_FALSE(resolve_eval_settings(bad_policy, "lab.yaml", *spelling).is_ok());
  }
  EXPECT_NE(resolve_eval_settings(bad_cache, "lab.yaml", kFlags).status().message().find("--cache-mb -1"),
            std::string::npos);
  EXPECT_NE(resolve_eval_settings(bad_cache, "lab.yaml", kKeywords).status().message().find("cache_mb=-1"),
            std::string::npos);
}

TEST(FrontEndSettings, PartitionSettingsHoldThePartitionersDefaultsAndNameBadOptions) {
  EXPECT_EQ(cli::PartitionCommand{}.settings, PartitionSettings{});
  Result<partition::PartitionOptions> resolved = resolve_partition_settings(PartitionSettings{}, kFlags);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  const partition::PartitionOptions defaults;
  EXPECT_EQ(resolved->method, defaults.method);
  EXPECT_EQ(resolved->objective, defaults.objective);
  EXPECT_EQ(resolved->imbalance, defaults.imbalance);
  EXPECT_EQ(resolved->seed, defaults.seed);
  PartitionSettings settings;
  settings.method = "hash";
  settings.objective = "volume";
  settings.imbalance = 1.1;
  settings.seed = 9;
  resolved = resolve_partition_settings(settings, kKeywords);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->method, partition::PartitionMethod::kHash);
  EXPECT_EQ(resolved->objective, partition::Objective::kVolume);
  EXPECT_EQ(resolved->imbalance, 1.1);
  EXPECT_EQ(resolved->seed, 9u);
  PartitionSettings bad_method;
  bad_method.method = "spectral";
  PartitionSettings bad_objective;
  bad_objective.objective = "balance";
  for (const OptionSpelling* spelling : {&kFlags, &kKeywords}) {
    const Status method = resolve_partition_settings(bad_method, *spelling).status();
    EXPECT_EQ(method.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(method.message().rfind(spelling->name("method") + ": ", 0), 0u) << method.message();
    const Status objective = resolve_partition_settings(bad_objective, *spelling).status();
    EXPECT_EQ(objective.message().rfind(spelling->name("objective") + ": ", 0), 0u) << objective.message();
  }
}

}  // namespace
}  // namespace tessera::balance::session

namespace tessera::balance::session {
namespace {

// The one check of a multiply's working memory (the CLI's and Python's), in both spellings.
TEST(MultiplyChecks, WorkingMemoryBeyondTheMachineIsRefusedNamingWhatWouldNotFit) {
  EXPECT_TRUE(check_multiply_memory(64, 64, 64, multiply::VerifyMode::kExact, false, true, "; use a smaller --n", kFlags));
  // Shapes that a .npy header can claim: m x n wraps 64 bits, the check saturates.
  constexpr uint64_t kHuge = uint64_t{1} << 40;
  const Status a_alone = check_multiply_memory(kHuge, 1, kHuge, multiply::VerifyMode::kNone, false, true,
                                               "; use a smaller --n", kFlags);
  ASSERT_FALSE(a_alone);
  EXPECT_NE(a_alone.message().find("A 1099511627776x1099511627776"), std::string::npos) << a_alone.message();
  EXPECT_EQ(a_alone.message().find("--verify none"), std::string::npos) << "nothing to drop: " << a_alone.message();
  // A and B already held: the total names what the run would add, and the way out by verify.
  const Status total = check_multiply_memory(kHuge, kHuge, 2, multiply::VerifyMode::kFreivalds, true, true,
                                             "; multiply smaller matrices", kKeywords);
  ASSERT_FALSE(total);
  EXPECT_NE(total.message().find("besides A and B already in memory"), std::string::npos) << total.message();
  EXPECT_NE(total.message().find("verify=\"none\""), std::string::npos) << total.message();
  const Status flags = check_multiply_memory(kHuge, kHuge, 2, multiply::VerifyMode::kExact, true, false,
                                             "; multiply smaller matrices", kFlags);
  ASSERT_FALSE(flags);
  EXPECT_NE(flags.message().find("--verify none"), std::string::npos) << flags.message();
  EXPECT_EQ(flags.message().find("(C, "), std::string::npos) << "the caller's C is not counted: " << flags.message();
}

TEST(MultiplyChecks, ANonFiniteInputIsRefusedNamingItsCellFileAndSwitch) {
  linalg::Matrix m(2, 3);
  EXPECT_TRUE(check_finite_input(m, "A", "a.npy", kFlags));
  m.at(1, 2) = std::numeric_limits<double>::quiet_NaN();
  const Status file = check_finite_input(m, "A", "a\x1b]0;x\a.npy", kFlags);
  ASSERT_FALSE(file);
  EXPECT_EQ(file.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(file.message().find("A[1][2] is NaN"), std::string::npos) << file.message();
  EXPECT_NE(file.message().find("--allow-nonfinite"), std::string::npos) << file.message();
  EXPECT_EQ(file.message().find('\x1b'), std::string::npos) << "the file name is quoted escaped";
  const Status memory = check_finite_input(m, "A", "", kKeywords);
  ASSERT_FALSE(memory);
  EXPECT_EQ(memory.message().rfind("A[1][2] is NaN", 0), 0u) << memory.message();
  EXPECT_NE(memory.message().find("allow_nonfinite=True"), std::string::npos) << memory.message();
}

}  // namespace
}  // namespace tessera::balance::session
