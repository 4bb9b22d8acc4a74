// The resident study (resident_study.hpp): work repeated on matrices kept on the nodes, per
// iteration, in each variant; repetitions interleave the variants; every product checked. The
// loop, the clusters' lifecycle and report.md's frame are the study runner's (study_runner.hpp).
#include "tessera/experiment/resident_study.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "study_io.hpp"
#include "study_runner.hpp"
#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/balance/multiply/iterate.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/core/stats.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/linalg/gemm.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::experiment {

namespace {

using namespace steps;
using ResidentClock = std::chrono::steady_clock;

double seconds_since(ResidentClock::time_point start) {
  return std::chrono::duration<double>(ResidentClock::now() - start).count();
}

// The targets, per iteration against the fastest node alone, stated beside the figures.
struct ResidentTarget {
  ResidentWorkload workload;
  std::string_view cluster;  // the cluster file's name
  double at_most;            // cluster / desktop-alone
};
constexpr ResidentTarget kResidentTargets[] = {
    {ResidentWorkload::kPower, "local-mixed-lan", 0.62},       {ResidentWorkload::kThinProducts, "local-mixed-lan", 0.62},
    {ResidentWorkload::kThinProducts, "local-mixed", 1.05},    {ResidentWorkload::kCg, "local-mixed-lan", 0.65},
    {ResidentWorkload::kLayerStack, "local-mixed-lan", 0.75},  {ResidentWorkload::kLayerStack, "local-mixed", 1.0},
};
constexpr double kResidentTargetBoundShare = 0.85;  // power: of the bound the nodes' rates all at once give

// ---------------------------------------------------------------------------------------------
// Study file

const StudyFileSchema kResidentStudySchema{.kind = "a resident study",
                                           .workload = "resident",
                                           .name_example = "resident",
                                           .own_keys = {"workloads", "variants"}};
const std::vector<std::string> kResidentWorkloadKeys = {"name", "n", "columns", "iterations", "layers", "tol"};
constexpr std::string_view kResidentWorkloadExample = "{name: power, n: 16384, iterations: 34}";

Result<ResidentWorkload> parse_resident_workload(std::string_view name) {
  for (ResidentWorkload w : {ResidentWorkload::kPower, ResidentWorkload::kThinProducts, ResidentWorkload::kCg,
                             ResidentWorkload::kLayerStack}) {
    if (name == resident_workload_name(w)) return w;
  }
  return invalid_config(fmt::format("unknown workload {}; use power, thin-products, cg or layer-stack",
                                    cluster::single_quoted(name)));
}

Result<ResidentVariant> parse_resident_variant(std::string_view name) {
  for (ResidentVariant v : {ResidentVariant::kCluster, ResidentVariant::kDesktopAlone, ResidentVariant::kEven,
                            ResidentVariant::kBlasOneCore}) {
    if (name == resident_variant_name(v)) return v;
  }
  return invalid_config(fmt::format("unknown variant {}; use cluster, desktop-alone, even or blas-1core",
                                    cluster::single_quoted(name)));
}

ResidentWorkloadSpec parse_resident_workload_entry(const cluster::YamlMap::Entry& item) {
  if (!item.value.IsMap()) {
    cluster::fail_at(item.line, fmt::format("a workload is {}; each is a mapping, e.g. - {}",
                                            cluster::describe_yaml(item.value), kResidentWorkloadExample));
  }
  const cluster::YamlMap fields(item.value, item.line, kResidentWorkloadKeys, "the workload");
  const std::optional<std::string> name = fields.text("name", "power");
  if (!name) fields.fail_missing("name", "power");
  Result<ResidentWorkload> workload = parse_resident_workload(*name);
  if (!workload) cluster::fail_at(fields.find("name")->line, workload.status().message());
  ResidentWorkloadSpec spec;
  spec.workload = *workload;
  const std::optional<uint64_t> n = fields.integer("n", 2, 65536, "16384");
  if (!n) fields.fail_missing("n", "16384");
  spec.n = *n;
  const bool cg = spec.workload == ResidentWorkload::kCg;
  if (std::optional<uint64_t> iterations = fields.integer("iterations", 1, 100000, "34")) {
    if (cg) cluster::fail_at(fields.find("iterations")->line, "cg runs to its tol; remove iterations, or set tol: 1e-10");
    spec.iterations = static_cast<uint32_t>(*iterations);
  } else if (!cg) {
    fields.fail_missing("iterations", "34");
  }
  if (std::optional<uint64_t> columns = fields.integer("columns", 1, 4096, "64")) {
    if (spec.workload != ResidentWorkload::kThinProducts) {
      cluster::fail_at(fields.find("columns")->line, "columns belongs to thin-products only; remove it");
    }
    spec.columns = *columns;
  } else if (spec.workload == ResidentWorkload::kThinProducts) {
    fields.fail_missing("columns", "64");
  }
  if (std::optional<uint64_t> layers = fields.integer("layers", 1, 256, "16")) {
    if (spec.workload != ResidentWorkload::kLayerStack) {
      cluster::fail_at(fields.find("layers")->line, "layers belongs to layer-stack only; remove it");
    }
    spec.layers = static_cast<uint32_t>(*layers);
  } else if (spec.workload == ResidentWorkload::kLayerStack) {
    fields.fail_missing("layers", "16");
  }
  if (std::optional<double> tol = fields.number("tol", cluster::NumberRange{0.0, 1.0, false, false}, "1e-10")) {
    if (!cg) cluster::fail_at(fields.find("tol")->line, "tol belongs to cg only; remove it");
    spec.tol = *tol;
  }
  return spec;
}

ResidentStudy parse_resident_study(const YAML::Node& root, const std::string& path) {
  const cluster::YamlMap keys = study_keys(root, kResidentStudySchema);
  ResidentStudy study;
  study.cluster_paths = read_study_header_into(study, keys, path, kResidentStudySchema);
  const std::string example = "[" + std::string(kResidentWorkloadExample) + "]";
  std::set<ResidentWorkload> seen;
  if (std::optional<std::vector<cluster::YamlMap::Entry>> items = keys.list("workloads", example)) {
    for (const cluster::YamlMap::Entry& item : *items) {
      study.workloads.push_back(parse_resident_workload_entry(item));
      if (!seen.insert(study.workloads.back().workload).second) {
        cluster::fail_at(item.line, "a workload is listed twice; list each once");
      }
    }
  }
  if (study.workloads.empty()) keys.fail_missing("workloads", example);
  if (keys.has("variants")) {
    study.variants = parsed_list<ResidentVariant>(keys, "variants", "[cluster, desktop-alone, even, blas-1core]", parse_resident_variant);
    if (std::set<ResidentVariant>(study.variants.begin(), study.variants.end()).size() != study.variants.size()) {
      cluster::fail_at(keys.find("variants")->line, "a variant is listed twice; list each once");
    }
  }
  return study;
}

// ---------------------------------------------------------------------------------------------
// Inputs

// A symmetric positive definite n x n matrix: (R + R^T) / 2 + shift I with R uniform in [-1, 1).
// The symmetric part's eigenvalues fill about +-2 sqrt(n / 6) (the semicircle), so a shift 5%
// past that edge keeps A definite with a condition number near 40: conjugate gradient needs some
// seventy steps to 1e-10, as a real solve does, and power iteration on it runs its steps in full.
linalg::Matrix resident_spd_matrix(uint64_t n, uint64_t seed) {
  linalg::Matrix a = linalg::random_matrix(n, n, seed);
  for (uint64_t i = 0; i < n; ++i) {
    for (uint64_t j = i + 1; j < n; ++j) {
      const double mean = 0.5 * (a.at(i, j) + a.at(j, i));
      a.at(i, j) = a.at(j, i) = mean;
    }
  }
  const double shift = 1.05 * 2.0 * std::sqrt(static_cast<double>(n) / 6.0);
  for (uint64_t i = 0; i < n; ++i) a.at(i, i) += shift;
  return a;
}

// Layers of a stack, scaled so that relu(W y) keeps y's norm about the same (entries uniform in
// +-sqrt(6 / n), variance 2 / n).
std::vector<linalg::Matrix> resident_layer_matrices(uint64_t n, uint32_t layers) {
  std::vector<linalg::Matrix> out;
  const double scale = std::sqrt(6.0 / static_cast<double>(n));
  for (uint32_t l = 0; l < layers; ++l) {
    out.push_back(linalg::random_matrix(n, n, 1000 + l));
    for (double& v : out.back().values) v *= scale;
  }
  return out;
}

std::vector<double> resident_random_vector(uint64_t n, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = uniform(random);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Records

struct ResidentRunRecord {
  std::size_t cluster = 0;
  std::size_t workload = 0;  // index into study.workloads
  ResidentVariant variant{};
  uint32_t repetition = 0;
  std::vector<double> iteration_s;  // each step, product or token of this run
  double placement_s = NAN;         // the first run of a placement: what placing it cost
  double bytes_placed = 0.0;        // ... and sent
  double bytes_run = 0.0;           // what the run's products moved, both ways
  double bound_s = NAN;             // power, cluster: the nodes' rates measured all at once
  std::string rows;                 // "desktop:9088 pi1:2225 ..." (placed variants)
  bool verified = false;
};

using ResidentGroupKey = std::tuple<std::size_t, std::size_t, ResidentVariant>;

struct ResidentGroupStats {
  std::vector<const ResidentRunRecord*> runs;
  std::vector<double> iterations() const {
    std::vector<double> all;
    for (const ResidentRunRecord* run : runs) all.insert(all.end(), run->iteration_s.begin(), run->iteration_s.end());
    return all;
  }
  double median_iteration() const {
    const std::vector<double> all = iterations();
    return all.empty() ? NAN : median(all);
  }
  double placement_s() const {
    double total = 0.0;
    for (const ResidentRunRecord* run : runs) total += std::isfinite(run->placement_s) ? run->placement_s : 0.0;
    return total;
  }
  double bytes_sent() const {
    double total = 0.0;
    for (const ResidentRunRecord* run : runs) total += run->bytes_placed + run->bytes_run;
    return total;
  }
  double bytes_per_iteration() const {
    double bytes = 0.0;
    std::size_t count = 0;
    for (const ResidentRunRecord* run : runs) {
      bytes += run->bytes_run;
      count += run->iteration_s.size();
    }
    return count == 0 ? NAN : bytes / static_cast<double>(count);
  }
  double bound_s() const {
    std::vector<double> all;
    for (const ResidentRunRecord* run : runs) {
      if (std::isfinite(run->bound_s)) all.push_back(run->bound_s);
    }
    return all.empty() ? NAN : median(all);
  }
  std::string rows() const { return runs.empty() ? "" : runs.front()->rows; }
  bool all_verified() const {
    return std::all_of(runs.begin(), runs.end(), [](const ResidentRunRecord* r) { return r->verified; });
  }
};

std::map<ResidentGroupKey, ResidentGroupStats> summarise_resident(const std::vector<ResidentRunRecord>& records) {
  std::map<ResidentGroupKey, ResidentGroupStats> groups;
  for (const ResidentRunRecord& r : records) groups[{r.cluster, r.workload, r.variant}].runs.push_back(&r);
  return groups;
}

const ResidentGroupStats* find_resident_group(const std::map<ResidentGroupKey, ResidentGroupStats>& groups, ResidentGroupKey key) {
  const auto found = groups.find(key);
  return found == groups.end() ? nullptr : &found->second;
}

// The comparisons the report and summary.csv state for one group.
struct ResidentComparison {
  double to_alone = NAN;       // per-iteration median / desktop-alone's
  double to_blas = NAN;        // per-iteration median / blas-1core's
  double break_even = NAN;     // iterations after which the variant's placement has paid, against desktop-alone
};

ResidentComparison compare_resident(const std::map<ResidentGroupKey, ResidentGroupStats>& groups, const ResidentGroupKey& key) {
  ResidentComparison c;
  const ResidentGroupStats* self = find_resident_group(groups, key);
  if (self == nullptr) return c;
  const double mine = self->median_iteration();
  const ResidentGroupStats* alone = find_resident_group(groups, {std::get<0>(key), std::get<1>(key), ResidentVariant::kDesktopAlone});
  const ResidentGroupStats* blas = find_resident_group(groups, {std::get<0>(key), std::get<1>(key), ResidentVariant::kBlasOneCore});
  if (alone != nullptr) {
    c.to_alone = mine / alone->median_iteration();
    const double saved = alone->median_iteration() - mine;
    const double extra = self->placement_s() - alone->placement_s();
    if (saved > 0.0) c.break_even = std::max(0.0, std::ceil(extra / saved));
  }
  if (blas != nullptr) c.to_blas = mine / blas->median_iteration();
  return c;
}

std::optional<double> resident_target_for(ResidentWorkload workload, std::string_view cluster) {
  for (const ResidentTarget& t : kResidentTargets) {
    if (t.workload == workload && t.cluster == cluster) return t.at_most;
  }
  return std::nullopt;
}

std::string_view resident_variant_colour(ResidentVariant variant) {
  switch (variant) {
    case ResidentVariant::kCluster: return "#4472c4";
    case ResidentVariant::kDesktopAlone: return "#a5a5a5";
    case ResidentVariant::kEven: return "#ed7d31";
    case ResidentVariant::kBlasOneCore: return "#70ad47";
  }
  return "#000000";
}

// ---------------------------------------------------------------------------------------------
// Output files

Status write_resident_csvs(const std::string& out_dir, const ResidentStudy& study, const std::vector<ClusterFacts>& clusters,
                  const std::vector<ResidentRunRecord>& records, const std::map<ResidentGroupKey, ResidentGroupStats>& groups) {
  std::string results = "workload,cluster,variant,repeat,iterations,per_iteration_median_s,per_iteration_min_s,"
                        "per_iteration_max_s,placement_s,bytes_placed,bytes_run,bound_s,verified\n";
  for (const ResidentRunRecord& r : records) {
    results += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", resident_workload_name(study.workloads[r.workload].workload),
                           clusters[r.cluster].spec.name, resident_variant_name(r.variant), r.repetition,
                           r.iteration_s.size(), csv_number(r.iteration_s.empty() ? NAN : median(r.iteration_s)),
                           csv_number(r.iteration_s.empty() ? NAN : minimum(r.iteration_s)),
                           csv_number(r.iteration_s.empty() ? NAN : maximum(r.iteration_s)), csv_number(r.placement_s),
                           csv_number(r.bytes_placed), csv_number(r.bytes_run), csv_number(r.bound_s),
                           r.verified ? "yes" : "no");
  }
  std::string summary = "workload,cluster,variant,runs,iterations,per_iteration_median_s,per_iteration_min_s,"
                        "per_iteration_max_s,placement_s,bytes_sent,bytes_per_iteration,to_desktop_alone,"
                        "to_blas_1core,break_even_iterations,bound_s,rows,verified\n";
  for (const auto& [key, stats] : groups) {
    const std::vector<double> all = stats.iterations();
    const ResidentComparison c = compare_resident(groups, key);
    summary += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                           resident_workload_name(study.workloads[std::get<1>(key)].workload),
                           clusters[std::get<0>(key)].spec.name, resident_variant_name(std::get<2>(key)), stats.runs.size(),
                           all.size(), csv_number(all.empty() ? NAN : median(all)),
                           csv_number(all.empty() ? NAN : minimum(all)), csv_number(all.empty() ? NAN : maximum(all)),
                           csv_number(stats.placement_s()), csv_number(stats.bytes_sent()),
                           csv_number(stats.bytes_per_iteration()), csv_number(c.to_alone), csv_number(c.to_blas),
                           csv_number(c.break_even), csv_number(stats.bound_s()), stats.rows(),
                           stats.all_verified() ? "yes" : "no");
  }
  TESSERA_RETURN_IF_ERROR(write_text_file(out_dir + "/results.csv", results));
  return write_text_file(out_dir + "/summary.csv", summary);
}

// One grouped bar chart per cluster: each workload's per-iteration median in every variant,
// relative to the desktop alone (min..max as error bars).
void plot_resident_variants(const std::string& out_dir, const ResidentStudy& study, const std::vector<ClusterFacts>& clusters,
                   const std::map<ResidentGroupKey, ResidentGroupStats>& groups, Plots& plots) {
  for (std::size_t cluster = 0; cluster < clusters.size(); ++cluster) {
    const std::string stem = "per-iteration-" + clusters[cluster].spec.name;
    std::string data = fmt::format("# workload{}\n", join(study.variants, "", [](ResidentVariant v) {
                                     return fmt::format(" {0}_median {0}_min {0}_max", resident_variant_name(v));
                                   }));
    bool any = false;
    for (std::size_t w = 0; w < study.workloads.size(); ++w) {
      const ResidentGroupStats* alone = find_resident_group(groups, {cluster, w, ResidentVariant::kDesktopAlone});
      const double unit = alone != nullptr ? alone->median_iteration() : NAN;
      data += fmt::format("\"{}\"", resident_workload_name(study.workloads[w].workload));
      for (ResidentVariant variant : study.variants) {
        const ResidentGroupStats* stats = find_resident_group(groups, {cluster, w, variant});
        const std::vector<double> all = stats != nullptr ? stats->iterations() : std::vector<double>{};
        if (all.empty() || !std::isfinite(unit)) {
          data += " ? ? ?";
          continue;
        }
        data += fmt::format(" {:.6g} {:.6g} {:.6g}", median(all) / unit, minimum(all) / unit, maximum(all) / unit);
        any = true;
      }
      data += "\n";
    }
    if (!any) continue;
    std::string lines;
    for (std::size_t v = 0; v < study.variants.size(); ++v) {
      lines += fmt::format("{}'{}/{}.dat' using {}:{}:{}{} lc rgb '{}' title '{}'", v == 0 ? "" : ", ", out_dir, stem,
                           2 + 3 * v, 3 + 3 * v, 4 + 3 * v, v == 0 ? ":xtic(1)" : "", resident_variant_colour(study.variants[v]),
                           resident_variant_name(study.variants[v]));
    }
    const std::string script = fmt::format(
        "set title 'Per iteration on {}, relative to the desktop alone (median, min..max)'\n"
        "set ylabel 'time / desktop alone'\nset yrange [0:*]\nset datafile missing '?'\nset style data histograms\n"
        "set style histogram errorbars gap 1 lw 1\nset style fill solid 0.6 border -1\nset boxwidth 0.9\n"
        "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#606060'\nplot {}\n",
        clusters[cluster].spec.name, lines);
    draw_plot(out_dir, stem, data, script,
              fmt::format("Time per iteration (step, product or token) of each workload on {} in each variant, "
                          "relative to the same code on the desktop alone (median over every iteration of every "
                          "repetition; bars span min..max). Below 1 the variant is faster than the desktop alone.",
                          clusters[cluster].spec.name),
              plots);
  }
}

std::string resident_workload_text(const ResidentWorkloadSpec& w) {
  switch (w.workload) {
    case ResidentWorkload::kPower:
      return fmt::format("power iteration on an SPD {0}x{0} matrix, {1} steps per repetition", w.n, w.iterations);
    case ResidentWorkload::kThinProducts:
      return fmt::format("A @ X with A the same {0}x{0} matrix and X {0}x{1}, {2} products per repetition", w.n,
                         w.columns, w.iterations);
    case ResidentWorkload::kCg:
      return fmt::format("conjugate gradient on the same matrix to a relative residual of {:g} (true residual checked)",
                         w.tol);
    case ResidentWorkload::kLayerStack:
      return fmt::format("{0} layers of {1}x{1} applied token by token, y = relu(W_i y), {2} tokens per repetition",
                         w.layers, w.n, w.iterations);
  }
  return "";
}

std::string resident_report_body(const ResidentStudy& study, const std::vector<ClusterFacts>& clusters,
                        const std::map<ResidentGroupKey, ResidentGroupStats>& groups) {
  std::string md = fmt::format(
      "- Variants: {}. cluster: every node, shares sized by the profile's rates and links and then measured on the "
      "placed rows (products run all at once; whole pieces of rows moved to where the measured costs put them); "
      "desktop-alone: the same code with every row on the node of the highest profiled GFLOP/s; even: every node "
      "the same rows; blas-1core: the same steps with OpenBLAS on one thread of the coordinator, the library call "
      "numpy makes for `A @ x` (nothing placed). Every product is checked (Freivalds with the placed check vector); "
      "CG's true residual and power iteration's eigenpair residual are computed from one more checked product.\n",
      join(study.variants, ", ", resident_variant_name));
  for (const ClusterFacts& facts : clusters) md += "- " + cluster_facts_line(facts) + "\n";
  for (const ResidentWorkloadSpec& w : study.workloads) {
    md += fmt::format("- Workload `{}`: {}\n", resident_workload_name(w.workload), resident_workload_text(w));
  }
  md += "\nPer iteration: the wall time of one step (power, cg: the product and the vector arithmetic on the "
        "coordinator), one product (thin-products) or one token through every layer (layer-stack), as the caller "
        "waits for it; median (min..max) over every iteration of every repetition. Placement: the seconds of placing "
        "(and, for cluster, measuring and moving) once, paid before the first iteration. Break-even: the iterations "
        "after which the variant's placement beyond the desktop alone's has been paid for by its faster iterations.\n";
  for (std::size_t w = 0; w < study.workloads.size(); ++w) {
    const ResidentWorkload workload = study.workloads[w].workload;
    for (std::size_t cluster = 0; cluster < clusters.size(); ++cluster) {
      const std::string& name = clusters[cluster].spec.name;
      std::string rows;
      for (ResidentVariant variant : study.variants) {
        const ResidentGroupStats* stats = find_resident_group(groups, {cluster, w, variant});
        if (stats == nullptr) continue;
        const std::vector<double> all = stats->iterations();
        const ResidentComparison c = compare_resident(groups, {cluster, w, variant});
        rows += fmt::format("| {} | {} | {} | {} | {} | {:.1f} | {} | {} | {} |\n", resident_variant_name(variant),
                            all.empty() ? "-"
                                        : fmt::format("{:.4f} ({:.4f}..{:.4f})", median(all), minimum(all), maximum(all)),
                            ratio_text(c.to_alone), ratio_text(c.to_blas),
                            variant == ResidentVariant::kBlasOneCore ? "-" : fmt::format("{:.2f}", stats->placement_s()),
                            stats->bytes_sent() / 1e6, std::isfinite(c.break_even) ? fmt::format("{:.0f}", c.break_even) : "-",
                            stats->rows().empty() ? "-" : stats->rows(), stats->all_verified() ? "yes" : "no");
      }
      if (rows.empty()) continue;
      md += fmt::format("\n### {} on {}\n\n| variant | per iteration s | / desktop alone | / blas-1core | placement s | "
                        "MB sent | break-even | rows | verified |\n|---|---|---|---|---|---|---|---|---|\n",
                        resident_workload_name(workload), name);
      md += rows;
      const ResidentComparison c = compare_resident(groups, {cluster, w, ResidentVariant::kCluster});
      if (std::optional<double> target = resident_target_for(workload, name); target && std::isfinite(c.to_alone)) {
        md += fmt::format("\n- Target: cluster at most {:.2f}x the desktop alone per iteration; measured {:.2f}x: {}.\n",
                          *target, c.to_alone, c.to_alone <= *target ? "met" : "NOT met");
      }
      if (const ResidentGroupStats* mine = find_resident_group(groups, {cluster, w, ResidentVariant::kCluster});
          mine != nullptr && std::isfinite(mine->bound_s())) {
        const double share = mine->bound_s() / mine->median_iteration();
        md += fmt::format("- The nodes' GEMV rates measured all at once (each node's rows over its compute time in "
                          "products run together) bound a step at {:.4f} s; the cluster's step reaches {:.0f}% of "
                          "that bound (target >= {:.0f}%): {}.\n",
                          mine->bound_s(), 100.0 * share, 100.0 * kResidentTargetBoundShare,
                          share >= kResidentTargetBoundShare ? "met" : "NOT met");
      }
    }
  }
  return md;
}

// ---------------------------------------------------------------------------------------------
// Running

// A placed matrix of the study, by what it holds and how it was placed; the cluster variant's
// shares depend on the operand's columns too.
using ResidentPlacementKey = std::tuple<int, ResidentVariant, uint64_t>;  // (matrix, variant, columns)

class ResidentStudyKind final : public StudyKind {
 public:
  ResidentStudyKind(const ResidentStudy& study, StudyOutline outline) : StudyKind(std::move(outline)), study_(study) {}

  Status prepare(const std::string&, std::ostream& progress) override {
    // Coordinator-side baselines run on one thread, as numpy does with OPENBLAS_NUM_THREADS=1.
    linalg::set_blas_threads(1);
    for (const ResidentWorkloadSpec& w : study_.workloads) {
      if (w.workload == ResidentWorkload::kLayerStack) {
        if (layers_.empty()) {
          progress << fmt::format("generating {} layers of {}x{}\n", w.layers, w.n, w.n);
          layers_ = resident_layer_matrices(w.n, w.layers);
          for (linalg::Matrix& layer : layers_) linalg::prefer_huge_pages(layer);
        }
      } else if (!spd_) {
        progress << fmt::format("generating a symmetric positive definite {}x{} matrix\n", w.n, w.n);
        spd_ = resident_spd_matrix(w.n, 42);
        linalg::prefer_huge_pages(*spd_);  // as numpy's array would be: blas-1core streams it
      } else if (spd_->rows != w.n) {
        return invalid_config(fmt::format("{}: power, thin-products and cg share one matrix; give them the same n",
                                          study_.source_path));
      }
    }
    return Status::ok();
  }

  Status use_cluster(StudyCluster& cluster, std::size_t index) override {
    ClusterFacts facts{study_.cluster_paths[index], cluster.spec(), cluster.speeds()};
    const auto fastest = std::max_element(facts.speeds.begin(), facts.speeds.end());
    fastest_ = cluster.reachable().nodes[static_cast<std::size_t>(fastest - facts.speeds.begin())].name;
    clusters_.push_back(std::move(facts));
    placements_.clear();
    current_workload_ = SIZE_MAX;
    return Status::ok();
  }

  std::size_t cells() const override { return study_.workloads.size(); }

  Status run_cell(StudyCluster& cluster, std::size_t, std::size_t cell, uint32_t repetition,
                  const session::RunControl& control, RunCounter& counter) override {
    if (cell != current_workload_) {
      release_unneeded(cluster.session(), cell);
      current_workload_ = cell;
    }
    std::string line = fmt::format("{} on {} #{}:", resident_workload_name(study_.workloads[cell].workload),
                                   cluster.spec().name, repetition);
    for (ResidentVariant variant : study_.variants) {
      ResidentRunRecord record;
      record.cluster = clusters_.size() - 1;
      record.workload = cell;
      record.variant = variant;
      record.repetition = repetition;
      const std::string label = fmt::format("{} {} on {} #{}", resident_workload_name(study_.workloads[cell].workload),
                                            resident_variant_name(variant), cluster.spec().name, repetition);
      if (Status ran = run_variant(cluster.session(), study_.workloads[cell], variant, control, record); !ran) {
        return ran.with_context(label + ": ");
      }
      const double per = record.iteration_s.empty() ? NAN : median(record.iteration_s);
      const std::string placed =
          std::isfinite(record.placement_s) ? fmt::format(" (placed in {:.2f} s)", record.placement_s) : "";
      line += fmt::format("{} {} {:.4f} s{}", variant == study_.variants.front() ? "" : ",", resident_variant_name(variant),
                          per, placed);
      records_.push_back(std::move(record));
      if (!records_.back().verified) return verification_failed(label + ": a result failed verification");
    }
    counter.finished(line + " per iteration");
    return Status::ok();
  }

  Status write_tables(const std::string& out_dir) override {
    groups_ = summarise_resident(records_);
    return write_resident_csvs(out_dir, study_, clusters_, records_, groups_);
  }

  void draw_plots(const std::string& out_dir, Plots& plots) override {
    plot_resident_variants(out_dir, study_, clusters_, groups_, plots);
  }

  std::string report_body() const override { return resident_report_body(study_, clusters_, groups_); }

 private:
  // The matrix a workload runs on: 0 the SPD one, 1 + l layer l.
  static constexpr int kSpd = 0;

  session::PlacementOptions placement_options(ResidentVariant variant, uint64_t columns) const {
    session::PlacementOptions options;
    options.columns = columns;
    // Every placement cold, as the study measures what placing costs: nothing loaded from the
    // workers' block stores (another variant's pieces would be there) and no shares remembered.
    options.use_block_stores = false;
    if (variant == ResidentVariant::kDesktopAlone) options.nodes = {fastest_};
    if (variant == ResidentVariant::kEven) options.split = session::PlacementOptions::Split::kEven;
    return options;
  }

  linalg::MatrixView matrix(int which) const {
    return which == kSpd ? linalg::MatrixView(*spd_) : linalg::MatrixView(layers_[static_cast<std::size_t>(which - 1)]);
  }

  // A placed matrix: its id on the session and what placing it cost.
  struct Placed {
    uint64_t id = 0;
    double seconds = 0.0;
    double bytes = 0.0;
    std::string rows;  // "desktop:9088 pi1:2225 ..." (a CSV cell: no commas)
  };

  // The placement of `which` for `variant`, placed now when it is not yet. Each workload's first
  // run on it carries its cost (a placement two workloads share is paid by each in its figures,
  // as either alone would pay it).
  Result<uint64_t> placed(session::Session& session, int which, ResidentVariant variant, uint64_t columns,
                          const session::RunControl& control, ResidentRunRecord& record) {
    // Only the cluster variant's shares depend on the operand's width.
    const ResidentPlacementKey key{which, variant, variant == ResidentVariant::kCluster ? columns : 0};
    auto found = placements_.find(key);
    if (found == placements_.end()) {
      Result<session::ResidentPlacement> done =
          session.place_rows(matrix(which), placement_options(variant, columns), control);
      if (!done) return done.status();
      Placed fresh{done->id, done->seconds, static_cast<double>(done->bytes_placed),
                   join(done->rows_per_node, " ", [](const auto& node) { return fmt::format("{}:{}", node.first, node.second); })};
      found = placements_.emplace(key, std::move(fresh)).first;
    }
    const Placed& placement = found->second;
    if (charged_.insert({record.cluster, record.workload, key}).second) {
      record.placement_s = (std::isfinite(record.placement_s) ? record.placement_s : 0.0) + placement.seconds;
      record.bytes_placed += placement.bytes;
    }
    if (record.rows.empty()) record.rows = placement.rows;
    return placement.id;
  }

  // Frees the placements no workload from `cell` on runs on (the workers' memory holds one
  // workload's matrices at a time, plus those shared with later ones).
  void release_unneeded(session::Session& session, std::size_t cell) {
    std::set<int> needed;
    for (std::size_t w = cell; w < study_.workloads.size(); ++w) {
      if (study_.workloads[w].workload == ResidentWorkload::kLayerStack) {
        for (uint32_t l = 0; l < study_.workloads[w].layers; ++l) needed.insert(static_cast<int>(l) + 1);
      } else {
        needed.insert(kSpd);
      }
    }
    for (auto it = placements_.begin(); it != placements_.end();) {
      if (needed.count(std::get<0>(it->first)) == 0) {
        session.release_resident(it->second.id);
        it = placements_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // One product of the placed matrix `id` (or of `which` here, for blas-1core): y = A X.
  Status product(session::Session& session, ResidentVariant variant, int which, std::optional<uint64_t> id,
                 linalg::MatrixView x, linalg::MutableMatrixView y, const session::RunControl& control,
                 ResidentRunRecord& record) {
    if (variant == ResidentVariant::kBlasOneCore) {
      const linalg::MatrixView a = matrix(which);
      linalg::gemm(a.rows, x.cols, a.cols, 1.0, a.data, a.ld, x.data, x.ld, 0.0, y.data, y.ld);
      return Status::ok();
    }
    Result<multiply::ResidentProduct> run = session.multiply_resident(*id, x, y, control);
    if (!run) return run.status();
    if (!run->verification.passed) return verification_failed(run->verification.detail);
    for (const multiply::ResidentNodeRun& node : run->nodes) {
      record.bytes_run += static_cast<double>(node.bytes_to_node + node.bytes_from_node);
    }
    return Status::ok();
  }

  Status run_variant(session::Session& session, const ResidentWorkloadSpec& w, ResidentVariant variant,
                     const session::RunControl& control, ResidentRunRecord& record) {
    const bool local = variant == ResidentVariant::kBlasOneCore;
    record.verified = true;
    if (w.workload == ResidentWorkload::kLayerStack) {
      std::vector<std::optional<uint64_t>> ids(w.layers);
      if (!local) {
        for (uint32_t l = 0; l < w.layers; ++l) {
          Result<uint64_t> id = placed(session, static_cast<int>(l) + 1, variant, 1, control, record);
          if (!id) return id.status();
          ids[l] = *id;
        }
      }
      std::vector<double> y = resident_random_vector(w.n, 7), next(w.n);
      for (uint32_t token = 0; token < w.iterations; ++token) {
        const auto start = ResidentClock::now();
        for (uint32_t l = 0; l < w.layers; ++l) {
          TESSERA_RETURN_IF_ERROR(product(session, variant, static_cast<int>(l) + 1, ids[l],
                                          linalg::MatrixView(y.data(), w.n, 1), linalg::MutableMatrixView(next.data(), w.n, 1),
                                          control, record));
          for (uint64_t i = 0; i < w.n; ++i) y[i] = std::max(0.0, next[i]);
        }
        record.iteration_s.push_back(seconds_since(start));
        // The next token: a fresh input of the same size (the stack's output stays bounded).
        y = resident_random_vector(w.n, 8 + token);
      }
      return Status::ok();
    }
    std::optional<uint64_t> id;
    if (!local) {
      Result<uint64_t> placed_id = placed(session, kSpd, variant, w.columns, control, record);
      if (!placed_id) return placed_id.status();
      id = *placed_id;
    }
    const uint64_t n = w.n;
    if (w.workload == ResidentWorkload::kThinProducts) {
      linalg::Matrix x(n, w.columns);
      linalg::Matrix y(n, w.columns);
      for (uint32_t i = 0; i < w.iterations; ++i) {
        const std::vector<double> values = resident_random_vector(n * w.columns, 100 + i);
        std::copy(values.begin(), values.end(), x.values.begin());
        const auto start = ResidentClock::now();
        TESSERA_RETURN_IF_ERROR(product(session, variant, kSpd, id, x, y, control, record));
        record.iteration_s.push_back(seconds_since(start));
      }
      return Status::ok();
    }
    Result<multiply::IterationOutcome> outcome = internal_error("no method ran");
    if (w.workload == ResidentWorkload::kPower) {
      multiply::PowerOptions options;
      options.iterations = w.iterations;
      options.tol = 1e-300;  // every step runs: the study times steps, not convergence
      outcome = local ? multiply::power_iteration(multiply::local_product(*spd_), options, control.cancel)
                      : session.power_iteration(*id, options, control);
    } else {
      multiply::CgOptions options;
      options.tol = w.tol;
      const std::vector<double> b = resident_random_vector(n, 9);
      outcome = local ? multiply::conjugate_gradient(multiply::local_product(*spd_), b, options, control.cancel)
                      : session.conjugate_gradient(*id, b, options, control);
      if (outcome) record.verified = outcome->converged;
    }
    if (!outcome) return outcome.status();
    record.iteration_s = outcome->step_seconds;
    record.bytes_run += static_cast<double>(outcome->bytes_moved);
    if (w.workload == ResidentWorkload::kPower && variant == ResidentVariant::kCluster) {
      TESSERA_RETURN_IF_ERROR(measure_bound(session, *id, n, control, record));
    }
    return Status::ok();
  }

  // The step the nodes' GEMV rates allow when they all run at once: n rows over the sum of each
  // node's rows per second of compute, in products run together (median of five).
  Status measure_bound(session::Session& session, uint64_t id, uint64_t n, const session::RunControl& control,
                       ResidentRunRecord& record) {
    std::vector<double> v = resident_random_vector(n, 11), y(n);
    std::vector<double> bounds;
    for (int i = 0; i < 5; ++i) {
      Result<multiply::ResidentProduct> run =
          session.multiply_resident(id, linalg::MatrixView(v.data(), n, 1), linalg::MutableMatrixView(y.data(), n, 1), control);
      if (!run) return run.status();
      double rows_per_s = 0.0;
      for (const multiply::ResidentNodeRun& node : run->nodes) {
        if (node.compute_s > 0.0) rows_per_s += static_cast<double>(node.rows) / node.compute_s;
      }
      if (rows_per_s > 0.0) bounds.push_back(static_cast<double>(n) / rows_per_s);
    }
    if (!bounds.empty()) record.bound_s = median(bounds);
    return Status::ok();
  }

  const ResidentStudy& study_;
  std::optional<linalg::Matrix> spd_;
  std::vector<linalg::Matrix> layers_;
  std::vector<ClusterFacts> clusters_;
  std::string fastest_;
  std::map<ResidentPlacementKey, Placed> placements_;
  std::set<std::tuple<std::size_t, std::size_t, ResidentPlacementKey>> charged_;  // (cluster, workload, placement)
  std::size_t current_workload_ = SIZE_MAX;
  std::vector<ResidentRunRecord> records_;
  std::map<ResidentGroupKey, ResidentGroupStats> groups_;
};

}  // namespace

std::string_view resident_workload_name(ResidentWorkload workload) {
  switch (workload) {
    case ResidentWorkload::kPower: return "power";
    case ResidentWorkload::kThinProducts: return "thin-products";
    case ResidentWorkload::kCg: return "cg";
    case ResidentWorkload::kLayerStack: return "layer-stack";
  }
  return "unknown";
}

std::string_view resident_variant_name(ResidentVariant variant) {
  switch (variant) {
    case ResidentVariant::kCluster: return "cluster";
    case ResidentVariant::kDesktopAlone: return "desktop-alone";
    case ResidentVariant::kEven: return "even";
    case ResidentVariant::kBlasOneCore: return "blas-1core";
  }
  return "unknown";
}

Result<ResidentStudy> load_resident_study(const std::string& path) {
  return load_study_file<ResidentStudy>(path, parse_resident_study);
}

Status run_resident_study(const ResidentStudy& study, const ExperimentOptions& options, std::ostream& progress) {
  StudyOutline outline = outline_of(study);
  // Each workload's repetitions back to back (its placements stay while it runs); the variants
  // interleave inside every repetition.
  outline.interleaved = false;
  outline.files_note = "Files: `results.csv` (one row per run), `summary.csv` (per workload, cluster and variant: "
                       "per-iteration median, min, max over every iteration, placement, bytes, ratios), the plots' "
                       "data (`*.dat`) and gnuplot scripts (`*.gp`).\n";
  ResidentStudyKind kind(study, std::move(outline));
  return run_study(kind, options, progress);
}

}  // namespace tessera::experiment
