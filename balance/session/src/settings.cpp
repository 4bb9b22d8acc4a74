#include "tessera/balance/session/settings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "tessera/core/memory.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/graph/reference.hpp"

namespace tessera::balance::session {

OptionSpelling::OptionSpelling(Style style, std::map<std::string, std::string, std::less<>> renamed)
    : style_(style), renamed_(std::move(renamed)) {}

std::string OptionSpelling::name(std::string_view field) const {
  if (auto renamed = renamed_.find(field); renamed != renamed_.end()) return renamed->second;
  if (style_ == Style::kKeyword) return std::string(field);
  std::string flag = "--";
  for (char c : field) flag += c == '_' ? '-' : c;
  return flag;
}

std::string OptionSpelling::assignment(std::string_view field, std::string_view value, bool text) const {
  if (style_ == Style::kFlag) return fmt::format("{} {}", name(field), value);
  return text ? fmt::format("{}=\"{}\"", name(field), value) : fmt::format("{}={}", name(field), value);
}

std::string OptionSpelling::switched_on(std::string_view field) const {
  return style_ == Style::kFlag ? name(field) : fmt::format("{}=True", name(field));
}

Result<MultiplyOptions> resolve_multiply_settings(const MultiplySettings& settings, std::size_t node_count,
                                                  const std::string& config_path, const OptionSpelling& spelling) {
  Result<plan::Policy> policy = plan::parse_policy(settings.policy);
  if (!policy) return policy.status();
  Result<multiply::VerifyMode> verify_mode = multiply::parse_verify_mode(settings.verify);
  if (!verify_mode) return verify_mode.status();
  if (*policy != plan::Policy::kProportional && !settings.weights.empty()) {
    return invalid_argument(fmt::format("{} applies to {} only", spelling.name("weights"),
                                        spelling.assignment("policy", "proportional", /*text=*/true)));
  }
  if (!settings.weights.empty() && settings.weights.size() != node_count) {
    return invalid_argument(fmt::format("{} has {} values for {} nodes ({}); give one per node",
                                        spelling.name("weights"), settings.weights.size(), node_count, config_path));
  }
  Result<partition::Layout> layout = partition::parse_layout(settings.layout);
  if (!layout) return layout.status();
  TESSERA_RETURN_IF_ERROR(plan::check_layout(*policy, *layout));
  std::optional<plan::Distribution> distribution;
  if (settings.distribution != "auto") {
    Result<plan::Distribution> parsed = plan::parse_distribution(settings.distribution);
    if (!parsed) {
      return invalid_argument(fmt::format("{}: unknown distribution '{}'; use one of: auto, star, chain",
                                          spelling.name("distribution"), settings.distribution));
    }
    distribution = *parsed;
  }
  if (distribution == plan::Distribution::kChain && !plan::chain_possible(*policy, *layout)) {
    return invalid_argument(fmt::format("{} forwards B along the nodes of a static rows or 2d plan; {} has none",
                                        spelling.assignment("distribution", "chain", /*text=*/true),
                                        *policy == plan::Policy::kDynamic
                                            ? spelling.assignment("policy", "dynamic", /*text=*/true)
                                            : spelling.assignment("layout", settings.layout, /*text=*/true)));
  }
  // A panel is at most a 2^20-row slice of B, the largest dimension accepted; more than 1024
  // panels in flight per node would only hold memory, never hide more latency.
  if (settings.panel_width == 0 || settings.panel_width > kMaxPanelWidth) {
    return invalid_argument(fmt::format("{} must be between 1 and {}",
                                        spelling.assignment("panel_width", std::to_string(settings.panel_width)),
                                        kMaxPanelWidth));
  }
  if (settings.panels_in_flight == 0 || settings.panels_in_flight > kMaxPanelsInFlight) {
    return invalid_argument(fmt::format("{} must be between 1 and {}",
                                        spelling.assignment("panels_in_flight", std::to_string(settings.panels_in_flight)),
                                        kMaxPanelsInFlight));
  }
  if (settings.refill_threshold == 0 || settings.refill_threshold > settings.panels_in_flight) {
    return invalid_argument(fmt::format(
        "{} must be between 1 and {}", spelling.assignment("refill_threshold", std::to_string(settings.refill_threshold)),
        spelling.assignment("panels_in_flight", std::to_string(settings.panels_in_flight))));
  }
  if (!(settings.node_timeout_s >= 0.0) || settings.node_timeout_s > 86400.0) {
    return invalid_argument(fmt::format("{} must be between 0 (derive it from the profile) and 86400 seconds",
                                        spelling.assignment("node_timeout_s", fmt::format("{}", settings.node_timeout_s))));
  }
  MultiplyOptions options;
  options.policy = plan::default_choice(*policy);
  if (auto* proportional = std::get_if<plan::ProportionalPolicy>(&options.policy)) proportional->weights = settings.weights;
  if (auto* dynamic = std::get_if<plan::DynamicPolicy>(&options.policy)) dynamic->tile_rows = settings.tile_rows;
  options.layout = *layout;
  options.distribution = distribution;
  options.panel_width = settings.panel_width;
  options.panels_in_flight = settings.overlap ? settings.panels_in_flight : 1;
  options.refill_threshold = settings.overlap ? settings.refill_threshold : 1;
  options.verify = *verify_mode;
  options.verify_seed = settings.seed;
  options.node_timeout_s = settings.node_timeout_s;
  return options;
}

Result<EvalOptions> resolve_eval_settings(const EvalSettings& settings, const std::string& config_path,
                                          const OptionSpelling& spelling) {
  MultiplySettings multiply;
  multiply.policy = settings.policy;
  multiply.verify = settings.verify;
  // No weights are taken, so the node count (known once the cluster is read) is not needed.
  Result<MultiplyOptions> products = resolve_multiply_settings(multiply, 0, config_path, spelling);
  if (!products) return products.status();
  Result<EvalMode> mode = parse_eval_mode(settings.mode);
  if (!mode) return invalid_argument(fmt::format("{}: {}", spelling.name("mode"), mode.status().message()));
  if (settings.cache_mb < 0.0 || !std::isfinite(settings.cache_mb)) {
    return invalid_argument(fmt::format("{} must be a positive number of megabytes (0: half each worker's tile memory)",
                                        spelling.assignment("cache_mb", fmt::format("{}", settings.cache_mb))));
  }
  Result<expr::TileRoute> route = expr::parse_tile_route(settings.tile_route);
  if (!route) return invalid_argument(fmt::format("{}: {}", spelling.name("tile_route"), route.status().message()));
  EvalOptions options;
  options.tile_route = *route;
  options.multiply = *products;
  options.rewrite = settings.rewrite;
  options.mode = *mode;
  options.tile = settings.tile;
  options.cache_bytes = settings.cache_mb * 1e6;
  options.only_nodes = settings.nodes;
  options.every_node = settings.every_node;
  return options;
}

Result<PlacementOptions> resolve_placement_settings(const PlacementSettings& settings, const OptionSpelling& spelling) {
  PlacementOptions options;
  if (settings.columns == 0) {
    return invalid_argument(fmt::format("{} must be 1 or more: the placement is sized for operands of that many columns",
                                        spelling.assignment("columns", "0")));
  }
  if (settings.split == "balanced") {
    options.split = PlacementOptions::Split::kBalanced;
  } else if (settings.split == "even") {
    options.split = PlacementOptions::Split::kEven;
  } else {
    return invalid_argument(fmt::format("{}: give balanced (by the nodes' measured rates) or even (the same rows each)",
                                        spelling.assignment("split", settings.split, true)));
  }
  options.columns = settings.columns;
  options.nodes = settings.nodes;
  options.measure = settings.measure;
  options.expected_products = std::max<uint64_t>(1, settings.expected_products);
  options.memory_dir = placement_cache_dir(settings.placement_cache, "resident");
  return options;
}

Result<partition::PartitionOptions> resolve_partition_settings(const PartitionSettings& settings,
                                                               const OptionSpelling& spelling) {
  partition::PartitionOptions options;
  Result<partition::PartitionMethod> method = partition::parse_partition_method(settings.method);
  if (!method) return method.status().with_context(spelling.name("method") + ": ");
  Result<partition::Objective> objective = partition::parse_objective(settings.objective);
  if (!objective) return objective.status().with_context(spelling.name("objective") + ": ");
  options.method = *method;
  options.objective = *objective;
  options.imbalance = settings.imbalance;
  options.seed = settings.seed;
  return options;
}

std::string placement_cache_dir(const std::string& setting, const std::string& kind) {
  if (setting == "none") return "";
  if (!setting.empty()) return setting;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0') {
    return std::string(cache) + "/tessera/" + kind;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/tessera/" + kind;
  }
  return "";  // nowhere sensible to keep it: run without
}

Result<graph::AlgorithmSpec> graph_algorithm(const GraphSettings& settings, const graphdata::DirectedGraph& graph,
                                             const OptionSpelling& spelling) {
  if (settings.algorithm.empty()) {
    return invalid_argument(fmt::format("give {} pagerank, katz, cc or sssp", spelling.name("algorithm")));
  }
  Result<graph::AlgorithmKind> kind = graph::parse_algorithm(settings.algorithm);
  if (!kind) return kind.status().with_context(spelling.name("algorithm") + ": ");
  graph::AlgorithmSpec spec;
  spec.kind = *kind;
  spec.damping = settings.damping;
  spec.source = settings.source;
  if (settings.label != "max" && settings.label != "min") {
    return invalid_argument(fmt::format("unknown {} \"{}\"; use max or min", spelling.name("label"), settings.label));
  }
  spec.max_label = settings.label == "max";
  if (spec.kind == graph::AlgorithmKind::kKatz) {
    if (!settings.beta) {
      // The bound is cheap next to the run, and a suggestion saves the user computing one.
      const graph::SpectralBounds bounds = graph::spectral_radius_bounds(graph);
      return invalid_argument(fmt::format("katz needs {} below 1/lambda_max; this graph's lambda_max is at most "
                                          "{:.4g}, so for example {}",
                                          spelling.assignment("beta", "B"), bounds.upper,
                                          spelling.assignment("beta", fmt::format("{:.3g}", bounds.upper > 0.0
                                                                                                ? 0.5 / bounds.upper
                                                                                                : 0.5))));
    }
    spec.beta = *settings.beta;
  }
  return spec;
}

Result<graphs::GraphRunOptions> graph_run_options(const GraphSettings& settings,
                                                        const graphdata::DirectedGraph& graph,
                                                        const OptionSpelling& spelling) {
  Result<graph::AlgorithmSpec> spec = graph_algorithm(settings, graph, spelling);
  if (!spec) return spec.status();
  graphs::GraphRunOptions options;
  options.algorithm = *spec;
  Result<graphs::GraphMode> mode = graphs::parse_graph_mode(settings.mode);
  if (!mode) return mode.status().with_context(spelling.name("mode") + ": ");
  options.mode = *mode;
  if (settings.partition == "auto") {
    options.choose_method = true;
  } else {
    Result<partition::PartitionMethod> method = partition::parse_partition_method(settings.partition);
    if (!method) {
      // The graph command also takes auto, which the partitioner does not know.
      return invalid_argument(fmt::format("{}: {}, or auto (the default: chosen by forecast)", spelling.name("partition"),
                                          method.status().message()));
    }
    options.method = *method;
  }
  Result<graphs::NodeChoice> nodes = graphs::parse_node_choice(settings.nodes);
  if (!nodes) return nodes.status();
  options.nodes = std::move(*nodes);
  options.cache_dir = placement_cache_dir(settings.placement_cache);
  options.seed = settings.seed;
  if (settings.tolerance && graph::is_linear(*spec) && !(*settings.tolerance > 0.0 && std::isfinite(*settings.tolerance))) {
    return invalid_argument(fmt::format("{} must be a number > 0, e.g. 1e-6",
                                        spelling.assignment("tolerance", fmt::format("{}", *settings.tolerance))));
  }
  options.tolerance = settings.tolerance;
  if (settings.poll_ms == 0 || settings.snapshot_ms == 0) {
    return invalid_argument(
        fmt::format("{} and {} must be at least 1", spelling.name("poll_ms"), spelling.name("snapshot_ms")));
  }
  options.poll_interval = std::chrono::milliseconds(settings.poll_ms);
  options.snapshot_interval = std::chrono::milliseconds(settings.snapshot_ms);
  if (!(settings.level_fraction >= 0.0 && settings.level_fraction <= 1.0)) {
    return invalid_argument(fmt::format("{} must be between 0 (off) and 1",
                                        spelling.assignment("level_fraction", fmt::format("{}", settings.level_fraction))));
  }
  options.priority_level_fraction = settings.level_fraction;
  if (!(settings.batch_age_ms >= 0.0 && settings.batch_age_ms <= 10000.0)) {
    return invalid_argument(fmt::format("{} must be between 0 and 10000",
                                        spelling.assignment("batch_age_ms", fmt::format("{}", settings.batch_age_ms))));
  }
  options.engine.batch_max_age = std::chrono::microseconds(static_cast<int64_t>(settings.batch_age_ms * 1000.0));
  if (settings.batch_entries < 1 || settings.batch_entries > (1u << 24)) {
    return invalid_argument(fmt::format("{} must be between 1 and 16777216",
                                        spelling.assignment("batch_entries", std::to_string(settings.batch_entries))));
  }
  options.engine.batch_max_entries = settings.batch_entries;
  if (!(settings.priority_fraction > 0.0 && settings.priority_fraction <= 1.0)) {
    return invalid_argument(fmt::format(
        "{} must be in (0, 1]", spelling.assignment("priority_fraction", fmt::format("{}", settings.priority_fraction))));
  }
  options.engine.priority_fraction = settings.priority_fraction;
  if (!(settings.node_timeout_s > 0.0) || settings.node_timeout_s > 86400.0) {
    return invalid_argument(fmt::format("{} must be between 0 and 86400 seconds",
                                        spelling.assignment("node_timeout_s", fmt::format("{}", settings.node_timeout_s))));
  }
  options.node_timeout_s = settings.node_timeout_s;
  if (!(settings.max_seconds > 0.0)) return invalid_argument(fmt::format("{} must be > 0", spelling.name("max_seconds")));
  options.max_wall_s = settings.max_seconds;
  options.verify = settings.verify;
  return options;
}

Status check_profile_options(const profile::ProfileOptions& options, const cluster::ClusterSpec& cluster,
                             const std::string& config_path, const OptionSpelling& spelling) {
  if (options.reference_size < 16 || options.reference_size > 8192) {
    return invalid_argument(fmt::format("{} must be within 16..8192", spelling.name("reference_size")));
  }
  // Below a CPU-quota period a window catches whole slices or none; past 30 s a full profile of a
  // handful of nodes takes hours.
  if (!(options.window_seconds >= 0.05 && options.window_seconds <= 30.0)) {
    return invalid_argument(fmt::format("{} must be within 0.05..30 seconds",
                                        spelling.assignment("window_seconds", fmt::format("{}", options.window_seconds))));
  }
  for (const std::string& name : options.only_nodes) {
    if (cluster.find_node(name) < 0) {
      return invalid_argument(fmt::format("{}: no such node in {}; nodes are {}",
                                          spelling.assignment("only_nodes", name, /*text=*/true), config_path,
                                          join(cluster.nodes, ", ", &cluster::NodeSpec::name)));
    }
  }
  return Status::ok();
}

Status check_multiply_memory(uint64_t m, uint64_t n, uint64_t k, multiply::VerifyMode verify, bool inputs_in_memory,
                             bool allocates_c, std::string_view remedy, const OptionSpelling& spelling) {
  if (!inputs_in_memory) {
    TESSERA_RETURN_IF_ERROR(check_fits_in_memory(saturating_bytes(m, k, sizeof(double)), fmt::format("A {}x{}", m, k),
                                                 std::string(remedy)));
    TESSERA_RETURN_IF_ERROR(check_fits_in_memory(saturating_bytes(k, n, sizeof(double)), fmt::format("B {}x{}", k, n),
                                                 std::string(remedy)));
  }
  uint64_t doubles = 0;
  const auto add = [&doubles](uint64_t rows, uint64_t cols) {
    const uint64_t term = saturating_bytes(rows, cols, 1);
    doubles = doubles > UINT64_MAX - term ? UINT64_MAX : doubles + term;
  };
  if (allocates_c) add(m, n);
  add(k, n);
  if (!inputs_in_memory) {
    add(m, k);
    add(k, n);
  }
  const bool verified = verify != multiply::VerifyMode::kNone;
  if (verified) {
    add(m, k);
    add(k, n);
  }
  if (verify == multiply::VerifyMode::kExact) {
    add(m, n);
    add(m, n);
  }
  std::string held = inputs_in_memory ? "" : "A, B, ";
  if (allocates_c) held += "C, ";
  held += "a copy of B";
  if (verified) held += " and the verification's copies";
  if (inputs_in_memory) held += ", besides A and B already in memory";
  return check_fits_in_memory(saturating_bytes(doubles, 1, sizeof(double)),
                              fmt::format("multiplying A {}x{} by B {}x{} ({})", m, k, k, n, held),
                              std::string(remedy) +
                                  (verified ? " or " + spelling.assignment("verify", "none", true) : std::string()));
}

Status check_product_shapes(std::string_view a_name, uint64_t a_rows, uint64_t a_cols, std::string_view b_name,
                            uint64_t b_rows, uint64_t b_cols) {
  if (a_cols == b_rows) return Status::ok();
  return invalid_argument(fmt::format("{} is {}x{} and {} is {}x{}: A's columns must equal B's rows", printable(a_name),
                                      a_rows, a_cols, printable(b_name), b_rows, b_cols));
}

Status check_finite_input(linalg::MatrixView matrix, std::string_view name, std::string_view source,
                          const OptionSpelling& spelling) {
  const std::optional<multiply::NonFiniteEntry> entry = multiply::first_nonfinite(matrix);
  if (!entry) return Status::ok();
  return invalid_argument(fmt::format("{}{} (0-based [row][column]); fix the input, or pass {} to multiply it anyway "
                                      "(verification then counts matching NaN/inf entries as equal)",
                                      source.empty() ? "" : printable(source) + ": ",
                                      multiply::describe_nonfinite(name, *entry),
                                      spelling.switched_on("allow_nonfinite")));
}

}  // namespace tessera::balance::session
