// The expression study (expression_study.hpp): benchmarks evaluated on clusters in each mode,
// repetitions interleaved, every run verified, and its tables, plots and report sections. The
// loop, the clusters' lifecycle and report.md's frame are the study runner's (study_runner.hpp).
#include "tessera/experiment/expression_study.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "study_runner.hpp"
#include "study_io.hpp"
#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/balance/expr/parse.hpp"
#include "tessera/balance/expr/rewrite.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/core/stats.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::experiment {

namespace {

using namespace steps;

// The targets the scheduled evaluation is held to; the report states each next to the figures it applies to.
constexpr double kTargetPredictionError = 0.10;  // |predicted - measured| / measured makespan
constexpr double kTargetSpeedupShare = 0.85;     // of the theoretical speed-up, on local-mixed-lan
constexpr double kTargetBytesShare = 0.5;        // scheduled / naive bytes, on Markov and HITS

// ---------------------------------------------------------------------------------------------
// Study file

const StudyFileSchema kExpressionStudySchema{.kind = "an expression study",
                                             .workload = "expressions",
                                             .name_example = "expressions",
                                             .own_keys = {"benchmarks", "modes"}};
const std::vector<std::string> kBenchmarkKeys = {"name", "expression", "inputs"};
constexpr std::string_view kBenchmarkExample =
    "{name: markov, expression: \"u * P^16\", inputs: {u: \"random:1x4096\", P: \"random:4096x4096\"}}";

// A generated input, as `tessera eval --input NAME=random:RxC` makes it: the same name, shape and
// fill give the same matrix, so a study's run can be repeated by hand with `tessera eval`.
struct GeneratedInput {
  linalg::FillKind fill = linalg::FillKind::kUniform;
  uint64_t rows = 0, cols = 0;
};
constexpr uint64_t kMaxGeneratedDimension = uint64_t{1} << 16;

// "random:4096x4096" or "integers:64x8"; the error says what to write.
Result<GeneratedInput> parse_generated_input(std::string_view text) {
  const auto read = [](std::string_view part, uint64_t& value) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    return error == std::errc() && end == part.data() + part.size() && value >= 1 && value <= kMaxGeneratedDimension;
  };
  for (const auto& [prefix, fill] : {std::pair{std::string_view("random:"), linalg::FillKind::kUniform},
                                     std::pair{std::string_view("integers:"), linalg::FillKind::kIntegers}}) {
    if (text.substr(0, prefix.size()) != prefix) continue;
    const std::string_view shape = text.substr(prefix.size());
    const std::size_t x = shape.find('x');
    GeneratedInput input{fill, 0, 0};
    if (x != std::string_view::npos && read(shape.substr(0, x), input.rows) && read(shape.substr(x + 1), input.cols)) {
      return input;
    }
  }
  return invalid_config(fmt::format("{} is not a generated matrix; write random:ROWSxCOLS or integers:ROWSxCOLS with "
                                    "each 1..{}, e.g. random:4096x4096",
                                    cluster::single_quoted(text), kMaxGeneratedDimension));
}

linalg::Matrix generate_input(const std::string& name, const GeneratedInput& input) {
  return linalg::random_matrix(input.rows, input.cols, std::hash<std::string>{}(name), input.fill);
}

// REQUIRES: every input of `benchmark` parses (load_expression_study checked it).
std::map<std::string, expr::Shape> input_shapes(const ExpressionBenchmark& benchmark) {
  std::map<std::string, expr::Shape> shapes;
  for (const auto& [name, spec] : benchmark.inputs) {
    const GeneratedInput input = *parse_generated_input(spec);
    shapes.emplace(name, expr::Shape{input.rows, input.cols});
  }
  return shapes;
}

ExpressionBenchmark parse_benchmark(const cluster::YamlMap::Entry& item, const std::set<std::string>& earlier_names) {
  if (!item.value.IsMap()) {
    cluster::fail_at(item.line, fmt::format("a benchmark is {}; each is a mapping, e.g. - {}", cluster::describe_yaml(item.value),
                                   kBenchmarkExample));
  }
  const cluster::YamlMap fields(item.value, item.line, kBenchmarkKeys, "the benchmark");
  ExpressionBenchmark benchmark;
  const std::optional<std::string> name = fields.text("name", "markov");
  if (!name) fields.fail_missing("name", "markov");
  if (name->find_first_not_of(kStudyNameCharacters) != std::string::npos) {
    cluster::fail_at(fields.find("name")->line, fmt::format("benchmark name {} has characters other than letters, digits, _ . -; "
                                                   "it labels the tables and plots, e.g. name: markov",
                                                   cluster::single_quoted(*name)));
  }
  if (earlier_names.count(*name) != 0) {
    cluster::fail_at(fields.find("name")->line, fmt::format("benchmark {} is named twice; give each its own name", cluster::single_quoted(*name)));
  }
  benchmark.name = *name;
  const std::string where = fmt::format("benchmark {}", cluster::single_quoted(benchmark.name));
  const std::optional<std::string> expression = fields.text("expression", "\"u * P^16\"");
  if (!expression) fields.fail_missing("expression", "\"u * P^16\"");
  benchmark.expression = *expression;

  const cluster::YamlMap::Entry* inputs = fields.find("inputs");
  if (inputs == nullptr) fields.fail_missing("inputs", "{u: \"random:1x4096\", P: \"random:4096x4096\"}");
  if (!inputs->value.IsMap() || inputs->value.size() == 0) {
    cluster::fail_at(inputs->line, fmt::format("{} has inputs {}; inputs must map each name to a generated matrix, e.g. "
                                      "inputs: {{u: \"random:1x4096\", P: \"random:4096x4096\"}}",
                                      where, cluster::describe_yaml(inputs->value)));
  }
  for (const auto& input : inputs->value) {
    const int line = cluster::yaml_line(input.second, inputs->line);
    const std::string input_name = cluster::yaml_text(input.first, line, "inputs", where, "P");
    const std::string spec = cluster::yaml_text(input.second, line, input_name, where, "random:4096x4096");
    if (Result<GeneratedInput> parsed = parse_generated_input(spec); !parsed) {
      cluster::fail_at(line, fmt::format("{} input {}: {}", where, input_name, parsed.status().message()));
    }
    benchmark.inputs.emplace_back(input_name, spec);
  }

  // The expression is checked against its inputs' shapes now, not after the clusters are up.
  const int expression_line = fields.find("expression")->line;
  Result<expr::Expr> parsed = expr::parse(benchmark.expression, input_shapes(benchmark));
  if (!parsed) cluster::fail_at(expression_line, fmt::format("{}: {}", where, parsed.status().message()));
  if (expr::cost(*parsed).products == 0) {
    cluster::fail_at(expression_line, fmt::format("{}: {} multiplies no matrices, so nothing would run on the cluster; give it "
                                         "a product, e.g. expression: \"A * B\"",
                                         where, cluster::single_quoted(benchmark.expression)));
  }
  const std::vector<std::string> used = expr::input_names(*parsed);
  for (const auto& [input_name, spec] : benchmark.inputs) {
    if (std::find(used.begin(), used.end(), input_name) == used.end()) {
      cluster::fail_at(inputs->line, fmt::format("{} gives input {}, which its expression does not use; remove it", where,
                                        input_name));
    }
  }
  return benchmark;
}

ExpressionStudy parse_expression_study(const YAML::Node& root, const std::string& path) {
  const cluster::YamlMap keys = study_keys(root, kExpressionStudySchema);
  ExpressionStudy study;
  study.cluster_paths = read_study_header_into(study, keys, path, kExpressionStudySchema);
  const std::string benchmarks_example = "[" + std::string(kBenchmarkExample) + "]";
  std::set<std::string> names;
  if (std::optional<std::vector<cluster::YamlMap::Entry>> items = keys.list("benchmarks", benchmarks_example)) {
    for (const cluster::YamlMap::Entry& item : *items) {
      study.benchmarks.push_back(parse_benchmark(item, names));
      names.insert(study.benchmarks.back().name);
    }
  }
  if (study.benchmarks.empty()) keys.fail_missing("benchmarks", benchmarks_example);
  if (keys.has("modes")) {
    study.modes = parsed_list<ExpressionMode>(keys, "modes", "[scheduled, sequence, fastest-alone]", parse_expression_mode);
    const std::set<ExpressionMode> distinct(study.modes.begin(), study.modes.end());
    if (distinct.size() != study.modes.size()) {
      cluster::fail_at(keys.find("modes")->line, "a mode is listed twice; list each once, e.g. modes: [scheduled, sequence]");
    }
  }
  return study;
}

// ---------------------------------------------------------------------------------------------
// Records

struct ExpressionRunRecord {
  std::size_t cluster = 0;
  std::size_t benchmark = 0;  // index into study.benchmarks
  ExpressionMode mode{};
  uint32_t repetition = 0;
  std::string evaluated;        // the expression that ran, after the rewrite by cost
  double wall_s = NAN;          // the whole evaluation, as the caller waited for it
  double makespan_s = NAN;      // scheduled: measured; sequence: the products' makespans summed
  double predicted_s = NAN;     // scheduled: the schedule simulated; sequence: the products' forecasts summed
  double theoretical_s = NAN;   // scheduled: the same DAG with every transfer free
  double fastest_alone_s = NAN; // scheduled: the same DAG on the fastest node alone, transfers free
  double bytes_moved = NAN;     // scheduled: tile bytes that travelled; sequence: every byte to and from nodes
  double naive_bytes = NAN;     // scheduled: tile bytes if every intermediate came back to the coordinator
  uint64_t tile = 0;            // scheduled: the tile size that ran; 0 otherwise
  double coordinator_sent = NAN;  // scheduled: every byte the coordinator wrote to the nodes
  bool verified = false;

  double prediction_error() const { return std::abs(predicted_s - makespan_s) / makespan_s; }
  double theoretical_speedup() const { return fastest_alone_s / theoretical_s; }
};

// The figures of one evaluation, whichever mode ran it.
ExpressionRunRecord figures_of(const expr::EvalOutcome& outcome) {
  ExpressionRunRecord record;
  record.evaluated = expr::to_string(outcome.evaluated);
  record.wall_s = outcome.seconds;
  if (const std::optional<expr::ScheduledEval>& scheduled = outcome.scheduled) {
    record.makespan_s = scheduled->measured_makespan_s;
    record.predicted_s = scheduled->predicted_makespan_s;
    record.theoretical_s = scheduled->theoretical_makespan_s;
    record.fastest_alone_s = scheduled->fastest_alone_s;
    record.bytes_moved = scheduled->measured_bytes;
    record.naive_bytes = scheduled->naive_bytes;
    record.tile = scheduled->tile;
    record.coordinator_sent = static_cast<double>(scheduled->coordinator_bytes_sent);
    record.verified = scheduled->verification.passed;
    return record;
  }
  record.makespan_s = 0.0;
  record.predicted_s = 0.0;
  record.bytes_moved = 0.0;
  record.verified = true;
  for (const expr::EvalProduct& product : outcome.products) {
    const multiply::MultiplyReport& report = product.report;
    record.makespan_s += report.run.makespan_s;
    // A sum of forecasts only when every product had one.
    record.predicted_s += report.prediction ? report.prediction->makespan_s : NAN;
    for (const multiply::NodeRunStats& node : report.run.nodes) {
      record.bytes_moved += static_cast<double>(node.bytes_to_node + node.bytes_from_node);
    }
    record.verified &= report.verification.passed;
  }
  return record;
}

struct ExpressionClusterFacts : ClusterFacts {
  std::string fastest;  // the node fastest-alone runs on
};

// Runs compared with each other: everything but the repetition.
using ExpressionGroupKey = std::tuple<std::size_t, std::size_t, ExpressionMode>;
ExpressionGroupKey key_of(const ExpressionRunRecord& r) { return {r.cluster, r.benchmark, r.mode}; }

// A figure of a run: a field (&ExpressionRunRecord::wall_s) or a derived one.
using Figure = std::function<double(const ExpressionRunRecord&)>;

struct ExpressionGroupStats {
  std::vector<const ExpressionRunRecord*> runs;
  // The finite values of `figure` over the runs (a mode without the figure gives none).
  std::vector<double> values(const Figure& figure) const {
    std::vector<double> out;
    for (const ExpressionRunRecord* run : runs) {
      if (const double value = figure(*run); std::isfinite(value)) out.push_back(value);
    }
    return out;
  }
  double median_of(const Figure& figure) const { return median(values(figure)); }
  // "1.234 (1.201..1.302)", "-" when no run has the figure.
  std::string spread(const Figure& figure) const {
    const std::vector<double> all = values(figure);
    if (all.empty()) return "-";
    return fmt::format("{:.3f} ({:.3f}..{:.3f})", median(all), minimum(all), maximum(all));
  }
  bool all_verified() const {
    return std::all_of(runs.begin(), runs.end(), [](const ExpressionRunRecord* r) { return r->verified; });
  }
};

std::map<ExpressionGroupKey, ExpressionGroupStats> summarise(const std::vector<ExpressionRunRecord>& records) {
  std::map<ExpressionGroupKey, ExpressionGroupStats> groups;
  for (const ExpressionRunRecord& record : records) groups[key_of(record)].runs.push_back(&record);
  return groups;
}

const ExpressionGroupStats* find_expression_group(const std::map<ExpressionGroupKey, ExpressionGroupStats>& groups, ExpressionGroupKey key) {
  auto found = groups.find(key);
  return found == groups.end() ? nullptr : &found->second;
}

// The figures the report compares for one cluster and benchmark; NaN where a mode did not run.
struct Comparison {
  double scheduled_s = NAN, sequence_s = NAN, alone_s = NAN;  // median makespans
  double prediction_error = NAN;      // scheduled, median over its runs
  double speedup = NAN;               // fastest-alone makespan / scheduled makespan
  double theoretical_speedup = NAN;   // scheduled, median over its runs
  double bytes_vs_naive = NAN;        // scheduled bytes / its naive bytes (medians)
  double bytes_vs_sequence = NAN;     // scheduled bytes / the sequence's bytes (medians)
  double speedup_share() const { return speedup / theoretical_speedup; }
};

Comparison compare(const std::map<ExpressionGroupKey, ExpressionGroupStats>& groups, std::size_t cluster, std::size_t benchmark) {
  Comparison c;
  const ExpressionGroupStats* scheduled = find_expression_group(groups, {cluster, benchmark, ExpressionMode::kScheduled});
  const ExpressionGroupStats* sequence = find_expression_group(groups, {cluster, benchmark, ExpressionMode::kSequence});
  const ExpressionGroupStats* alone = find_expression_group(groups, {cluster, benchmark, ExpressionMode::kFastestAlone});
  if (sequence) c.sequence_s = sequence->median_of(&ExpressionRunRecord::makespan_s);
  if (alone) c.alone_s = alone->median_of(&ExpressionRunRecord::makespan_s);
  if (scheduled) {
    c.scheduled_s = scheduled->median_of(&ExpressionRunRecord::makespan_s);
    c.prediction_error = scheduled->median_of(&ExpressionRunRecord::prediction_error);
    c.theoretical_speedup = scheduled->median_of(&ExpressionRunRecord::theoretical_speedup);
    c.speedup = c.alone_s / c.scheduled_s;
    const double bytes = scheduled->median_of(&ExpressionRunRecord::bytes_moved);
    c.bytes_vs_naive = bytes / scheduled->median_of(&ExpressionRunRecord::naive_bytes);
    if (sequence) c.bytes_vs_sequence = bytes / sequence->median_of(&ExpressionRunRecord::bytes_moved);
  }
  return c;
}

// "1.23" or "-" for a figure that is missing.
std::string percent_text(double value) { return std::isfinite(value) ? fmt::format("{:.1f}%", 100.0 * value) : "-"; }
std::string seconds_text(double value) { return std::isfinite(value) ? fmt::format("{:.3f}", value) : "-"; }
std::string megabytes_text(double bytes) { return std::isfinite(bytes) ? fmt::format("{:.1f}", bytes / 1e6) : "-"; }

// One colour per mode in every plot.
std::string_view mode_colour(ExpressionMode mode) {
  switch (mode) {
    case ExpressionMode::kScheduled: return "#4472c4";
    case ExpressionMode::kSequence: return "#ed7d31";
    case ExpressionMode::kFastestAlone: return "#a5a5a5";
    case ExpressionMode::kDirect: return "#ffc000";
    case ExpressionMode::kViaCoordinator: return "#70ad47";
  }
  return "#000000";
}

// ---------------------------------------------------------------------------------------------
// Output files

Status write_csvs(const std::string& out_dir, const ExpressionStudy& study, const std::vector<ExpressionClusterFacts>& clusters,
                  const std::vector<ExpressionRunRecord>& records, const std::map<ExpressionGroupKey, ExpressionGroupStats>& groups) {
  std::string results = "cluster,benchmark,mode,repeat,wall_s,makespan_s,predicted_s,theoretical_s,fastest_alone_s,"
                        "bytes_moved,naive_bytes,tile,coordinator_bytes_sent,verified\n";
  for (const ExpressionRunRecord& r : records) {
    results += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", clusters[r.cluster].spec.name,
                           study.benchmarks[r.benchmark].name, expression_mode_name(r.mode), r.repetition,
                           csv_number(r.wall_s), csv_number(r.makespan_s), csv_number(r.predicted_s),
                           csv_number(r.theoretical_s), csv_number(r.fastest_alone_s), csv_number(r.bytes_moved),
                           csv_number(r.naive_bytes), r.tile == 0 ? "" : std::to_string(r.tile),
                           csv_number(r.coordinator_sent), r.verified ? "yes" : "no");
  }
  std::string summary = "cluster,benchmark,mode,runs,wall_median_s,wall_min_s,wall_max_s,makespan_median_s,"
                        "makespan_min_s,makespan_max_s,bytes_moved_median,bytes_moved_min,bytes_moved_max,"
                        "predicted_median_s,theoretical_median_s,fastest_alone_median_s,naive_bytes_median,all_verified\n";
  for (const auto& [key, stats] : groups) {
    std::string cells;
    for (const Figure& measured :
         {Figure(&ExpressionRunRecord::wall_s), Figure(&ExpressionRunRecord::makespan_s),
          Figure(&ExpressionRunRecord::bytes_moved)}) {
      const std::vector<double> all = stats.values(measured);
      cells += all.empty() ? ",,," : fmt::format(",{},{},{}", csv_number(median(all)), csv_number(minimum(all)),
                                                 csv_number(maximum(all)));
    }
    // The model's figures vary only with the tile size chosen: their medians suffice.
    for (const Figure& modelled :
         {Figure(&ExpressionRunRecord::predicted_s), Figure(&ExpressionRunRecord::theoretical_s),
          Figure(&ExpressionRunRecord::fastest_alone_s), Figure(&ExpressionRunRecord::naive_bytes)}) {
      cells += "," + csv_number(stats.median_of(modelled));
    }
    summary += fmt::format("{},{},{},{}{},{}\n", clusters[std::get<0>(key)].spec.name,
                           study.benchmarks[std::get<1>(key)].name, expression_mode_name(std::get<2>(key)),
                           stats.runs.size(), cells, stats.all_verified() ? "yes" : "no");
  }
  TESSERA_RETURN_IF_ERROR(write_text_file(out_dir + "/results.csv", results));
  return write_text_file(out_dir + "/summary.csv", summary);
}

// One grouped bar chart per cluster: each benchmark's median makespan in every mode, min..max as
// error bars.
void plot_modes(const std::string& out_dir, const ExpressionStudy& study, const std::vector<ExpressionClusterFacts>& clusters,
                const std::map<ExpressionGroupKey, ExpressionGroupStats>& groups, Plots& plots) {
  for (std::size_t cluster = 0; cluster < clusters.size(); ++cluster) {
    const std::string stem = "modes-" + clusters[cluster].spec.name;
    std::string data = fmt::format("# benchmark{}\n", join(study.modes, "", [](ExpressionMode mode) {
                                     return fmt::format(" {0}_median {0}_min {0}_max", expression_mode_name(mode));
                                   }));
    bool any = false;
    for (std::size_t benchmark = 0; benchmark < study.benchmarks.size(); ++benchmark) {
      data += "\"" + study.benchmarks[benchmark].name + "\"";
      for (ExpressionMode mode : study.modes) {
        const ExpressionGroupStats* stats = find_expression_group(groups, {cluster, benchmark, mode});
        const std::vector<double> all = stats ? stats->values(&ExpressionRunRecord::makespan_s) : std::vector<double>{};
        // gnuplot leaves a gap for "?" (set datafile missing).
        data += all.empty() ? " ? ? ?" : fmt::format(" {:.6g} {:.6g} {:.6g}", median(all), minimum(all), maximum(all));
        any |= !all.empty();
      }
      data += "\n";
    }
    if (!any) continue;
    std::string plot_lines;
    for (std::size_t m = 0; m < study.modes.size(); ++m) {
      plot_lines += fmt::format("{}'{}/{}.dat' using {}:{}:{}{} lc rgb '{}' title '{}'", m == 0 ? "" : ", ", out_dir, stem,
                                2 + 3 * m, 3 + 3 * m, 4 + 3 * m, m == 0 ? ":xtic(1)" : "", mode_colour(study.modes[m]),
                                expression_mode_name(study.modes[m]));
    }
    const std::string script = fmt::format(
        "set title 'Makespan per benchmark and mode on {} (median, min..max)'\n"
        "set ylabel 'seconds'\nset yrange [0:*]\nset datafile missing '?'\nset style data histograms\n"
        "set style histogram errorbars gap 1 lw 1\nset style fill solid 0.6 border -1\nset boxwidth 0.9\n"
        "plot {}\n",
        clusters[cluster].spec.name, plot_lines);
    draw_plot(out_dir, stem, data, script,
              fmt::format("Makespan of each benchmark on {} in each mode (median of the repetitions; bars span "
                          "min..max). Sequence: the products' makespans summed (sums on the coordinator and the gaps "
                          "between products not included; see wall time in the tables).",
                          clusters[cluster].spec.name),
              plots);
  }
}

// Predicted against measured makespan of every scheduled run (all clusters): one point per run,
// coloured by mode, shaped by cluster, with the diagonal and the target's +-10% band.
void plot_prediction(const std::string& out_dir, const ExpressionStudy& study, const std::vector<ExpressionClusterFacts>& clusters,
                     const std::vector<ExpressionRunRecord>& records, Plots& plots) {
  std::map<std::pair<std::size_t, ExpressionMode>, std::string> series;
  double largest = 0.0;
  for (const ExpressionRunRecord& r : records) {
    if (r.mode == ExpressionMode::kSequence || !std::isfinite(r.predicted_s) || !std::isfinite(r.makespan_s)) continue;
    series[{r.cluster, r.mode}] += fmt::format("{:.6g} {:.6g} \"{}\"\n", r.makespan_s, r.predicted_s,
                                               study.benchmarks[r.benchmark].name);
    largest = std::max({largest, r.makespan_s, r.predicted_s});
  }
  if (series.empty()) return;
  constexpr int kPointTypes[] = {7, 5, 9, 11, 13};  // filled circle, square, triangles, diamond
  const std::string stem = "predicted-vs-measured";
  std::string data;
  std::string plot_lines;
  int block = 0;
  for (const auto& [which, rows] : series) {
    const auto& [cluster, mode] = which;
    const std::string label = fmt::format("{} {}", clusters[cluster].spec.name, expression_mode_name(mode));
    data += "# " + label + "\n" + rows + "\n\n";
    plot_lines += fmt::format(", '{}/{}.dat' index {} using 1:2 with points pt {} ps 1.3 lc rgb '{}' title '{}'", out_dir,
                              stem, block, kPointTypes[cluster % std::size(kPointTypes)], mode_colour(mode), label);
    ++block;
  }
  const double top = largest * 1.1;
  const std::string script = fmt::format(
      "set title 'Scheduled runs: predicted against measured makespan'\n"
      "set xlabel 'measured makespan, seconds'\nset ylabel 'predicted makespan, seconds'\nset xrange [0:{:.6g}]\n"
      "set yrange [0:{:.6g}]\n"
      "plot x with lines dt 1 lc rgb '#606060' title 'predicted = measured', {:.3f}*x with lines dt 2 lc rgb '#a0a0a0' "
      "title '+-{:.0f}%', {:.3f}*x with lines dt 2 lc rgb '#a0a0a0' notitle{}\n",
      top, top, 1.0 - kTargetPredictionError, 100.0 * kTargetPredictionError,
      1.0 + kTargetPredictionError, plot_lines);
  draw_plot(out_dir, stem, data, script,
            fmt::format("Predicted against measured makespan of every scheduled and fastest-alone run, one point per "
                        "run; the dashed lines bound the target's {:.0f}% error.",
                        100.0 * kTargetPredictionError),
            plots);
}

std::string inputs_text(const ExpressionBenchmark& benchmark) {
  return join(benchmark.inputs, ", ", [](const auto& input) { return fmt::format("{} = {}", input.first, input.second); });
}

// Scheduled runs with tiles worker to worker against the same schedules with every tile through the
// coordinator, when the study ran both: makespans and what the coordinator sent. Runs interleave, so
// the ratios of medians compare runs made side by side.
std::string direct_against_coordinator(const ExpressionStudy& study, const std::vector<ExpressionClusterFacts>& clusters,
                                       const std::map<ExpressionGroupKey, ExpressionGroupStats>& groups) {
  std::string rows;
  for (std::size_t cluster = 0; cluster < clusters.size(); ++cluster) {
    for (std::size_t benchmark = 0; benchmark < study.benchmarks.size(); ++benchmark) {
      const ExpressionGroupStats* direct = find_expression_group(groups, {cluster, benchmark, ExpressionMode::kDirect});
      const ExpressionGroupStats* via = find_expression_group(groups, {cluster, benchmark, ExpressionMode::kViaCoordinator});
      if (direct == nullptr || via == nullptr) continue;
      const double direct_s = direct->median_of(&ExpressionRunRecord::makespan_s);
      const double via_s = via->median_of(&ExpressionRunRecord::makespan_s);
      const double direct_sent = direct->median_of(&ExpressionRunRecord::coordinator_sent);
      const double via_sent = via->median_of(&ExpressionRunRecord::coordinator_sent);
      rows += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", clusters[cluster].spec.name,
                          study.benchmarks[benchmark].name, direct->spread(&ExpressionRunRecord::makespan_s),
                          via->spread(&ExpressionRunRecord::makespan_s), ratio_text(direct_s / via_s),
                          megabytes_text(direct_sent), megabytes_text(via_sent), ratio_text(direct_sent / via_sent));
    }
  }
  if (rows.empty()) return "";
  return "\n## Tiles worker to worker against through the coordinator\n\n`direct` sends a tile one node computed "
         "straight to the nodes that read it; `via-coordinator` runs the same kind of schedule with every such tile "
         "returned to the coordinator and sent on from there (`scheduled` takes the route its schedule forecasts "
         "sooner). Makespans in seconds, median (min..max); coordinator MB: "
         "everything the coordinator wrote to the nodes (inputs, jobs, tiles), median.\n\n"
         "| cluster | benchmark | direct s | via coordinator s | direct / via | coordinator MB direct | coordinator MB via "
         "| direct / via |\n|---|---|---|---|---|---|---|---|\n" +
         rows;
}

std::string report_tables(const ExpressionStudy& study, const std::vector<ExpressionClusterFacts>& clusters,
                          const std::map<ExpressionGroupKey, ExpressionGroupStats>& groups) {
  std::string md;
  std::string targets;
  for (std::size_t cluster = 0; cluster < clusters.size(); ++cluster) {
    for (std::size_t benchmark = 0; benchmark < study.benchmarks.size(); ++benchmark) {
      const Comparison c = compare(groups, cluster, benchmark);
      targets += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", clusters[cluster].spec.name,
                             study.benchmarks[benchmark].name, seconds_text(c.scheduled_s), seconds_text(c.sequence_s),
                             seconds_text(c.alone_s), percent_text(c.prediction_error), ratio_text(c.speedup),
                             ratio_text(c.theoretical_speedup), percent_text(c.speedup_share()),
                             ratio_text(c.bytes_vs_naive), ratio_text(c.bytes_vs_sequence));
    }
  }
  md += fmt::format(
      "\n## Against the targets\n\nMedian makespans in seconds. `prediction error` is the median over the scheduled "
      "runs of |predicted - measured| / measured (target <= {:.0f}%); `speed-up` is the fastest node alone's makespan "
      "over the scheduled one, `theoretical` the same DAG's with every transfer free (HEFT on the profiled speeds), "
      "`share` their ratio (target >= {:.0f}% on local-mixed-lan); `bytes / naive` is the tile bytes the scheduled "
      "run moved over those it would move with every intermediate back on the coordinator (target <= {:.2g} on Markov "
      "and HITS), `bytes / sequence` over the bytes the sequence of multiplies really moved.\n\n"
      "| cluster | benchmark | scheduled s | sequence s | fastest alone s | prediction error | speed-up | theoretical | "
      "share | bytes / naive | bytes / sequence |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
      100.0 * kTargetPredictionError, 100.0 * kTargetSpeedupShare, kTargetBytesShare);
  md += targets;
  md += direct_against_coordinator(study, clusters, groups);

  for (std::size_t cluster = 0; cluster < clusters.size(); ++cluster) {
    const ExpressionClusterFacts& facts = clusters[cluster];
    md += fmt::format("\n## Cluster {}\n", facts.spec.name);
    for (std::size_t benchmark = 0; benchmark < study.benchmarks.size(); ++benchmark) {
      const ExpressionBenchmark& b = study.benchmarks[benchmark];
      std::string rows;
      std::string evaluated;
      for (ExpressionMode mode : study.modes) {
        const ExpressionGroupStats* stats = find_expression_group(groups, {cluster, benchmark, mode});
        if (stats == nullptr) continue;
        if (evaluated.empty()) evaluated = stats->runs.front()->evaluated;
        const std::vector<double> tiles =
            stats->values([](const ExpressionRunRecord& r) { return r.tile == 0 ? NAN : static_cast<double>(r.tile); });
        rows += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", expression_mode_name(mode),
                            stats->runs.size(), stats->spread(&ExpressionRunRecord::makespan_s),
                            stats->spread(&ExpressionRunRecord::wall_s),
                            seconds_text(stats->median_of(&ExpressionRunRecord::predicted_s)),
                            seconds_text(stats->median_of(&ExpressionRunRecord::theoretical_s)),
                            megabytes_text(stats->median_of(&ExpressionRunRecord::bytes_moved)),
                            megabytes_text(stats->median_of(&ExpressionRunRecord::naive_bytes)),
                            megabytes_text(stats->median_of(&ExpressionRunRecord::coordinator_sent)),
                            tiles.empty() ? "-" : fmt::format("{:g}", median(tiles)),
                            stats->all_verified() ? "all" : "NOT ALL");
      }
      if (rows.empty()) continue;
      md += fmt::format("\n### {} on {}: `{}`\n\nEvaluated as `{}`.\n\n"
                        "| mode | runs | makespan median (min..max) s | wall median (min..max) s | predicted s | "
                        "theoretical s | MB moved | naive MB | coordinator MB sent | tile | verified |\n"
                        "|---|---|---|---|---|---|---|---|---|---|---|\n",
                        b.name, facts.spec.name, b.expression, evaluated);
      md += rows;
      const Comparison c = compare(groups, cluster, benchmark);
      if (std::isfinite(c.scheduled_s)) {
        md += fmt::format("\n- Prediction error of the scheduled makespan: {} (target <= {:.0f}%).\n",
                          percent_text(c.prediction_error), 100.0 * kTargetPredictionError);
        md += fmt::format("- Speed-up over {} alone: {} measured, {} in theory: {} of it.\n", facts.fastest,
                          ratio_text(c.speedup), ratio_text(c.theoretical_speedup), percent_text(c.speedup_share()));
        md += fmt::format("- Bytes moved, scheduled / naive: {}; scheduled / sequence: {}.\n", ratio_text(c.bytes_vs_naive),
                          ratio_text(c.bytes_vs_sequence));
        if (std::isfinite(c.sequence_s)) {
          md += fmt::format("- Scheduled against the sequence of multiplies: {}x faster (makespan).\n",
                            ratio_text(c.sequence_s / c.scheduled_s));
        }
      }
    }
  }
  return md;
}

std::string expression_study_report(const ExpressionStudy& study, const std::vector<ExpressionClusterFacts>& clusters,
                                    const std::map<ExpressionGroupKey, ExpressionGroupStats>& groups) {
  std::string md = fmt::format("- Modes: {}. scheduled: the tiled task DAG placed by HEFT with tile caches, tiles "
                               "between nodes by the route forecast sooner; sequence: one multiply per product, every "
                               "intermediate back on the coordinator; fastest-alone: scheduled on the node with the "
                               "highest profiled GFLOP/s alone; direct and via-coordinator: scheduled with every tile "
                               "between nodes worker to worker, or through the coordinator. Every run verified "
                               "(Freivalds).\n",
                               join(study.modes, ", ", expression_mode_name));
  for (const ExpressionClusterFacts& facts : clusters) {
    md += fmt::format("- {}; fastest alone: {}\n", cluster_facts_line(facts), facts.fastest);
  }
  for (const ExpressionBenchmark& b : study.benchmarks) {
    md += fmt::format("- Benchmark `{}`: `{}` with {}\n", b.name, b.expression, inputs_text(b));
  }
  md += "\nMakespan: scheduled modes, from the first byte sent to the result's last byte received; sequence, the "
        "products' makespans summed (the sums on the coordinator and the gaps between products are in the wall time "
        "only). Wall time is the whole evaluation as the caller waited for it, verification included.\n";
  return md + report_tables(study, clusters, groups);
}

// ---------------------------------------------------------------------------------------------
// Running

// A benchmark ready to run: its expression parsed against its generated inputs.
struct PreparedBenchmark {
  std::map<std::string, linalg::Matrix> matrices;
  std::map<std::string, linalg::MatrixView> views;
  expr::Expr expression;
};

Result<PreparedBenchmark> prepare_benchmark(const ExpressionBenchmark& benchmark) {
  PreparedBenchmark prepared;
  for (const auto& [name, spec] : benchmark.inputs) {
    Result<GeneratedInput> input = parse_generated_input(spec);
    if (!input) return input.status();
    prepared.matrices.emplace(name, generate_input(name, *input));
  }
  for (const auto& [name, matrix] : prepared.matrices) prepared.views.emplace(name, linalg::MatrixView(matrix));
  Result<expr::Expr> parsed = expr::parse(benchmark.expression, input_shapes(benchmark));
  if (!parsed) return parsed.status().with_context(fmt::format("benchmark {}: ", benchmark.name));
  prepared.expression = *parsed;
  return prepared;
}

session::EvalOptions eval_options(ExpressionMode mode, const std::string& fastest_node) {
  session::EvalOptions options;
  options.multiply.verify = multiply::VerifyMode::kFreivalds;
  options.mode = mode == ExpressionMode::kSequence ? session::EvalMode::kSequence : session::EvalMode::kScheduled;
  if (mode == ExpressionMode::kFastestAlone) options.only_nodes = {fastest_node};
  options.tile_route = mode == ExpressionMode::kDirect           ? expr::TileRoute::kDirect
                       : mode == ExpressionMode::kViaCoordinator ? expr::TileRoute::kCoordinator
                                                                 : expr::TileRoute::kAuto;
  return options;
}

// The expression study as the study runner runs it: each cell is one benchmark in one mode.
class ExpressionStudyKind final : public StudyKind {
 public:
  ExpressionStudyKind(const ExpressionStudy& study, StudyOutline outline)
      : StudyKind(std::move(outline)),
        study_(study) {}

  Status prepare(const std::string&, std::ostream&) override {
    for (const ExpressionBenchmark& benchmark : study_.benchmarks) {
      Result<PreparedBenchmark> ready = prepare_benchmark(benchmark);
      if (!ready) return ready.status();
      prepared_.push_back(std::move(*ready));
    }
    return Status::ok();
  }

  Status use_cluster(StudyCluster& cluster, std::size_t index) override {
    ExpressionClusterFacts facts{{study_.cluster_paths[index], cluster.spec(), cluster.speeds()}, ""};
    const auto fastest = std::max_element(facts.speeds.begin(), facts.speeds.end());
    facts.fastest = cluster.reachable().nodes[static_cast<std::size_t>(fastest - facts.speeds.begin())].name;
    clusters_.push_back(std::move(facts));
    return Status::ok();
  }

  std::size_t cells() const override { return study_.benchmarks.size() * study_.modes.size(); }

  Status run_cell(StudyCluster& cluster, std::size_t, std::size_t cell, uint32_t repetition,
                  const session::RunControl& control, RunCounter& counter) override {
    const std::size_t benchmark = cell / study_.modes.size();
    const ExpressionMode mode = study_.modes[cell % study_.modes.size()];
    const std::string& cluster_name = cluster.spec().name;
    const std::string label = fmt::format("{} {} on {} #{}", study_.benchmarks[benchmark].name,
                                          expression_mode_name(mode), cluster_name, repetition);
    Result<expr::EvalOutcome> ran = cluster.session().evaluate(
        prepared_[benchmark].expression, prepared_[benchmark].views, eval_options(mode, clusters_.back().fastest), control);
    if (!ran) return ran.status().with_context(label + ": ");
    ExpressionRunRecord record = figures_of(*ran);
    record.cluster = clusters_.size() - 1;
    record.benchmark = benchmark;
    record.mode = mode;
    record.repetition = repetition;
    counter.finished(fmt::format("{} {} {} #{}: makespan {:.3f} s, wall {:.3f} s, {:.1f} MB moved{}", cluster_name,
                                 study_.benchmarks[benchmark].name, expression_mode_name(mode), repetition,
                                 record.makespan_s, record.wall_s, record.bytes_moved / 1e6,
                                 record.verified ? "" : " NOT VERIFIED"));
    const bool verified = record.verified;
    records_.push_back(std::move(record));
    if (!verified) return verification_failed(label + ": the value failed verification");
    return Status::ok();
  }

  Status write_tables(const std::string& out_dir) override {
    groups_ = summarise(records_);
    return write_csvs(out_dir, study_, clusters_, records_, groups_);
  }

  void draw_plots(const std::string& out_dir, Plots& plots) override {
    plot_modes(out_dir, study_, clusters_, groups_, plots);
    plot_prediction(out_dir, study_, clusters_, records_, plots);
  }

  std::string report_body() const override { return expression_study_report(study_, clusters_, groups_); }

 private:
  const ExpressionStudy& study_;
  std::vector<PreparedBenchmark> prepared_;
  std::vector<ExpressionClusterFacts> clusters_;
  std::vector<ExpressionRunRecord> records_;
  std::map<ExpressionGroupKey, ExpressionGroupStats> groups_;
};

}  // namespace

std::string_view expression_mode_name(ExpressionMode mode) {
  switch (mode) {
    case ExpressionMode::kScheduled: return "scheduled";
    case ExpressionMode::kSequence: return "sequence";
    case ExpressionMode::kFastestAlone: return "fastest-alone";
    case ExpressionMode::kDirect: return "direct";
    case ExpressionMode::kViaCoordinator: return "via-coordinator";
  }
  return "unknown";
}

Result<ExpressionMode> parse_expression_mode(std::string_view name) {
  for (ExpressionMode mode : {ExpressionMode::kScheduled, ExpressionMode::kSequence, ExpressionMode::kFastestAlone,
                              ExpressionMode::kDirect, ExpressionMode::kViaCoordinator}) {
    if (name == expression_mode_name(mode)) return mode;
  }
  return invalid_config(fmt::format("unknown mode {}; use scheduled, sequence, fastest-alone, direct or via-coordinator",
                                    cluster::single_quoted(name)));
}

Result<ExpressionStudy> load_expression_study(const std::string& path) {
  return load_study_file<ExpressionStudy>(path, parse_expression_study);
}

Status run_expression_study(const ExpressionStudy& study, const ExperimentOptions& options, std::ostream& progress) {
  StudyOutline outline = outline_of(study);
  outline.files_note = "Files: `results.csv` (one row per run), `summary.csv` (median, min, max per cluster, "
                       "benchmark and mode), the plots' data (`*.dat`) and gnuplot scripts (`*.gp`).\n";
  ExpressionStudyKind kind(study, std::move(outline));
  return run_study(kind, options, progress);
}

}  // namespace tessera::experiment
