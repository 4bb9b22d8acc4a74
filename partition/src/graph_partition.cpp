#include "tessera/partition/graph_partition.hpp"
#include "tessera/partition/tiling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <type_traits>

#include <fmt/format.h>
#include <metis.h>

#include "tessera/partition/row_partition.hpp"

namespace tessera::partition {
namespace {

static_assert(std::is_same_v<idx_t, int32_t>, "Graph stores int32_t arrays and hands them to METIS as idx_t");
static_assert(std::is_same_v<real_t, float>, "targets are rounded to float to match METIS' real_t");

constexpr double kMaxImbalance = 10.0;  // keeps ufactor (thousandths) far from idx_t overflow

std::mutex& metis_mutex() {
  static std::mutex mutex;
  return mutex;
}

// splitmix64 (Steele, Lea, Flood 2014): a bijective mix, so hash(v) never collides for distinct v
// under one seed and needs no state, which keeps the hash method order-independent.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Vertex weights as the partitioners see them: a graph whose vertices all weigh 0 would make
// every target 0 and every balance undefined, so it is treated as unit-weighted.
int64_t effective_weight(const graphdata::Graph& graph, int32_t v) {
  return graph.total_vertex_weight() == 0 ? 1 : graph.vertex_weight(v);
}

std::vector<std::size_t> active_parts(const std::vector<double>& targets) {
  std::vector<std::size_t> active;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] > 0) active.push_back(i);
  }
  return active;
}

// Heaviest vertex first onto the active part whose load after taking it is lowest relative to its
// target (LPT scheduling with speeds): within one vertex's weight of the targets, cuts nothing when
// there are no edges, and never leaves a part empty while another holds two vertices it could
// share.
std::vector<int32_t> greedy_by_target(const graphdata::Graph& graph, const std::vector<double>& targets,
                                      const std::vector<std::size_t>& active) {
  const int32_t n = graph.vertex_count();
  std::vector<int32_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return effective_weight(graph, a) > effective_weight(graph, b); });
  std::vector<double> load(targets.size(), 0.0);
  std::vector<int32_t> part(static_cast<std::size_t>(n), 0);
  for (int32_t v : order) {
    const double w = static_cast<double>(effective_weight(graph, v));
    std::size_t best = active.front();
    double best_ratio = std::numeric_limits<double>::infinity();
    for (std::size_t p : active) {
      const double ratio = (load[p] + w) / targets[p];
      if (ratio < best_ratio) {
        best_ratio = ratio;
        best = p;
      }
    }
    load[best] += w;
    part[static_cast<std::size_t>(v)] = static_cast<int32_t>(best);
  }
  return part;
}

// METIS checks that tpwgts sums to 1 within a small tolerance in its own float arithmetic; the
// doubles rounded to float rarely sum to exactly 1.0f. The rounding error goes to the LARGEST
// target, where it is relatively smallest (the last one could be tiny and go to 0 or negative),
// and the float sum is recomputed in METIS' order until it is exactly 1.
std::vector<real_t> metis_targets(const std::vector<double>& targets, const std::vector<std::size_t>& active) {
  double active_sum = 0;
  for (std::size_t p : active) active_sum += targets[p];
  std::vector<real_t> tpwgts(active.size());
  std::size_t largest = 0;
  for (std::size_t i = 0; i < active.size(); ++i) {
    // A target below float's smallest normal would round to 0, which METIS rejects.
    tpwgts[i] = std::max(static_cast<real_t>(targets[active[i]] / active_sum), std::numeric_limits<real_t>::min());
    if (tpwgts[i] > tpwgts[largest]) largest = i;
  }
  for (int attempt = 0; attempt < 4; ++attempt) {
    real_t sum = 0;
    for (real_t t : tpwgts) sum += t;
    if (sum == 1.0f) break;
    tpwgts[largest] += 1.0f - sum;
  }
  return tpwgts;
}

struct MethodResult {
  std::vector<int32_t> part;
  std::string note;
};

Result<MethodResult> partition_metis(const graphdata::Graph& graph, const PartitionOptions& options,
                                     const std::vector<double>& targets) {
  std::vector<std::size_t> active = active_parts(targets);
  const int32_t n = graph.vertex_count();
  MethodResult result;
  result.part.assign(static_cast<std::size_t>(n), static_cast<int32_t>(active.front()));
  if (n == 0) {
    result.note = "empty graph: nothing to partition";
    return result;
  }
  if (active.size() == 1) {
    result.note = fmt::format("one part with target > 0: METIS not called (nparts = 1 divides by zero in METIS "
                              "5.1); all {} vertices go to part {}",
                              n, active.front());
    return result;
  }
  if (graph.edge_count() == 0) {
    result.part = greedy_by_target(graph, targets, active);
    result.note = "no edges: METIS not called; vertices placed greedily by target (nothing to cut)";
    return result;
  }
  if (static_cast<std::size_t>(n) <= active.size()) {
    result.part = greedy_by_target(graph, targets, active);
    result.note = fmt::format("{} vertices for {} parts: METIS not called (it errs or leaves parts empty); "
                              "vertices placed greedily by target",
                              n, active.size());
    return result;
  }
  const std::size_t zero_parts = targets.size() - active.size();
  std::string note =
      zero_parts == 0 ? "" : fmt::format("{} part(s) with target 0 left out of the METIS call", zero_parts);
  // A part whose share is below one unit of vertex weight should get nothing anyway, and METIS'
  // recursive bisection would have to split off an empty subgraph for it ("***Cannot bisect a
  // graph with 0 vertices!" on stdout, parts left empty at random): leave such parts out too.
  int64_t total = 0;
  for (int32_t v = 0; v < n; ++v) total += effective_weight(graph, v);
  std::vector<std::size_t> sizable;
  for (std::size_t p : active) {
    if (targets[p] * static_cast<double>(total) >= 1.0) sizable.push_back(p);
  }
  // Shares sum to the total weight, but with fewer units of weight than parts none may reach one.
  if (!sizable.empty() && sizable.size() < active.size()) {
    note += fmt::format("{}{} part(s) with a target below one unit of vertex weight left out", note.empty() ? "" : "; ",
                        active.size() - sizable.size());
    active = std::move(sizable);
  }
  if (active.size() == 1) {
    result.part.assign(static_cast<std::size_t>(n), static_cast<int32_t>(active.front()));
    result.note = note + fmt::format("; METIS not called for the one part left: all {} vertices go to part {}", n,
                                     active.front());
    return result;
  }

  idx_t nvtxs = n;
  idx_t ncon = 1;
  idx_t nparts = static_cast<idx_t>(active.size());
  // Copies: METIS takes non-const pointers and the Graph is shared as const.
  std::vector<idx_t> xadj = graph.xadj();
  std::vector<idx_t> adjncy = graph.adjncy();
  std::vector<idx_t> vwgt = graph.total_vertex_weight() == 0 ? std::vector<idx_t>{} : graph.vertex_weights();
  std::vector<idx_t> adjwgt = graph.edge_weights();
  std::vector<real_t> tpwgts = metis_targets(targets, active);
  idx_t metis_options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(metis_options);
  metis_options[METIS_OPTION_OBJTYPE] = options.objective == Objective::kVolume ? METIS_OBJTYPE_VOL : METIS_OBJTYPE_CUT;
  metis_options[METIS_OPTION_UFACTOR] = static_cast<idx_t>(std::lround((options.imbalance - 1.0) * 1000.0));
  metis_options[METIS_OPTION_SEED] = static_cast<idx_t>(options.seed % (uint64_t{1} << 31));
  metis_options[METIS_OPTION_NUMBERING] = 0;
  idx_t objval = 0;
  std::vector<idx_t> metis_part(static_cast<std::size_t>(n), 0);
  int code = 0;
  {
    std::lock_guard<std::mutex> lock(metis_mutex());
    code = METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(), vwgt.empty() ? nullptr : vwgt.data(),
                               /*vsize=*/nullptr, adjwgt.empty() ? nullptr : adjwgt.data(), &nparts, tpwgts.data(),
                               /*ubvec=*/nullptr, metis_options, &objval, metis_part.data());
  }
  TESSERA_RETURN_IF_ERROR(metis_status(code, fmt::format("METIS_PartGraphKway({} vertices, {} edges, {} parts)", n,
                                                         graph.edge_count(), nparts)));
  std::vector<int64_t> sizes(active.size(), 0);
  for (std::size_t v = 0; v < metis_part.size(); ++v) {
    const idx_t p = metis_part[v];
    if (p < 0 || p >= nparts) {
      return internal_error(fmt::format("METIS put vertex {} in part {}, outside 0..{}", v, p, nparts - 1));
    }
    result.part[v] = static_cast<int32_t>(active[static_cast<std::size_t>(p)]);
    ++sizes[static_cast<std::size_t>(p)];
  }
  const auto empty = static_cast<std::size_t>(std::count(sizes.begin(), sizes.end(), 0));
  result.note = note;
  if (empty > 0) {
    // Seen on tiny graphs (3 vertices, 2 parts): a part METIS should have filled stays empty and
    // its weight lands on another. Balance matters more than the cut of so small a graph.
    result.part = greedy_by_target(graph, targets, active);
    result.note += fmt::format("{}METIS left {} of {} parts empty; vertices placed greedily by target instead",
                               result.note.empty() ? "" : "; ", empty, active.size());
  }
  return result;
}

MethodResult partition_contiguous(const graphdata::Graph& graph, const std::vector<double>& targets) {
  const int32_t n = graph.vertex_count();
  int64_t total = 0;
  for (int32_t v = 0; v < n; ++v) total += effective_weight(graph, v);
  MethodResult result;
  result.part.assign(static_cast<std::size_t>(n), 0);
  // proportional_rows cannot fail here: the targets were validated by partition_graph.
  const std::vector<RowBlock> blocks = proportional_rows(static_cast<uint64_t>(total), targets).value();
  std::size_t last_active = 0;
  for (std::size_t p = 0; p < targets.size(); ++p) {
    if (targets[p] > 0) last_active = p;
  }
  // A vertex belongs to the block holding the midpoint of its weight interval [prefix, prefix+w)
  // (compared doubled to stay in integers), so each block gets the vertices mostly inside it and
  // empty blocks get none.
  std::size_t block = 0;
  uint64_t prefix = 0;
  for (int32_t v = 0; v < n; ++v) {
    const uint64_t w = static_cast<uint64_t>(effective_weight(graph, v));
    const uint64_t midpoint2 = 2 * prefix + w;
    while (block < blocks.size() && 2 * blocks[block].end() <= midpoint2) ++block;
    result.part[static_cast<std::size_t>(v)] = static_cast<int32_t>(block < blocks.size() ? block : last_active);
    prefix += w;
  }
  return result;
}

std::size_t last_active_part(const std::vector<double>& targets) {
  std::size_t last_active = 0;
  for (std::size_t p = 0; p < targets.size(); ++p) {
    if (targets[p] > 0) last_active = p;
  }
  return last_active;
}

// Gemini's chunking. A vertex's cost is alpha * weight + its adjacency entries: the vertex term
// is the per-vertex work (and, on placement_graph, already one unit per out-edge), the edge term
// the neighbour scans and messages that a part's edges bring. Gemini's alpha = 8 * (p - 1) grows
// with the parts because each extra part adds mirror/message work per vertex; with 4 parts it is
// 24, so on a mesh (4 entries per vertex) the split is nearly by vertex weight and on R-MAT
// (about 30 entries per vertex) edges count about as much as vertices.
MethodResult partition_chunks(const graphdata::Graph& graph, const std::vector<double>& targets) {
  const int32_t n = graph.vertex_count();
  const std::vector<std::size_t> active = active_parts(targets);
  const int64_t alpha = 8 * static_cast<int64_t>(active.size() - 1);
  const std::vector<int32_t>& xadj = graph.xadj();
  auto cost = [&](int32_t v) {
    const auto i = static_cast<std::size_t>(v);
    return alpha * effective_weight(graph, v) + (xadj[i + 1] - xadj[i]);
  };
  int64_t total = 0;
  for (int32_t v = 0; v < n; ++v) total += cost(v);
  MethodResult result;
  result.part.assign(static_cast<std::size_t>(n), static_cast<int32_t>(last_active_part(targets)));
  if (total == 0) return result;  // alpha 0 (one part) and no edges: everything on that part
  // bounds[p] = end of part p's cost interval; a zero target gives an empty interval.
  std::vector<double> bounds(targets.size());
  double cumulative = 0;
  for (std::size_t p = 0; p < targets.size(); ++p) {
    cumulative += targets[p];
    bounds[p] = cumulative * static_cast<double>(total);
  }
  // A vertex goes to the part whose interval holds the midpoint of its cost interval, so each part
  // is within one vertex's cost of its share and an empty interval gets nothing.
  std::size_t block = 0;
  int64_t prefix = 0;
  for (int32_t v = 0; v < n; ++v) {
    const int64_t c = cost(v);
    const double midpoint = static_cast<double>(prefix) + 0.5 * static_cast<double>(c);
    while (block < bounds.size() && (bounds[block] <= midpoint || targets[block] == 0)) ++block;
    if (block < bounds.size()) result.part[static_cast<std::size_t>(v)] = static_cast<int32_t>(block);
    prefix += c;
  }
  return result;
}

// Fennel in vertex order. Loads are compared as W_i / (k * t_i), so parts fill in proportion to
// their targets and with equal targets the penalty is the paper's. The hard cap keeps a part
// within `imbalance` of its target; when no part can take v under it (a heavy vertex late in the
// stream), v goes to the part whose load relative to its target stays lowest.
MethodResult partition_fennel(const graphdata::Graph& graph, const std::vector<double>& targets, double imbalance) {
  const int32_t n = graph.vertex_count();
  const std::vector<std::size_t> active = active_parts(targets);
  const double k = static_cast<double>(active.size());
  double total_weight = 0;
  for (int32_t v = 0; v < n; ++v) total_weight += static_cast<double>(effective_weight(graph, v));
  double total_edge_weight = 0;
  for (std::size_t i = 0; i < graph.adjncy().size(); ++i) {
    total_edge_weight += static_cast<double>(graph.edge_weight_at(i));
  }
  total_edge_weight /= 2;
  constexpr double kGamma = 1.5;
  const double alpha =
      total_weight > 0 ? std::sqrt(k) * total_edge_weight / std::pow(total_weight, kGamma) : 0.0;
  MethodResult result;
  result.part.assign(static_cast<std::size_t>(n), static_cast<int32_t>(active.front()));
  if (active.size() == 1) return result;

  std::vector<double> load(targets.size(), 0.0);
  std::vector<double> capacity(targets.size(), 0.0);
  std::vector<double> scale(targets.size(), 0.0);  // 1 / (k * t_i)
  for (std::size_t p : active) {
    capacity[p] = imbalance * targets[p] * total_weight;
    scale[p] = 1.0 / (k * targets[p]);
  }
  std::vector<double> neighbour_weight(targets.size(), 0.0);
  std::vector<std::size_t> touched;
  const std::vector<int32_t>& xadj = graph.xadj();
  const std::vector<int32_t>& adjncy = graph.adjncy();
  std::vector<uint8_t> placed(static_cast<std::size_t>(n), 0);
  int64_t over_cap = 0;
  for (int32_t v = 0; v < n; ++v) {
    const auto vi = static_cast<std::size_t>(v);
    for (int32_t i = xadj[vi]; i < xadj[vi + 1]; ++i) {
      const auto u = static_cast<std::size_t>(adjncy[static_cast<std::size_t>(i)]);
      if (!placed[u]) continue;
      const auto p = static_cast<std::size_t>(result.part[u]);
      if (neighbour_weight[p] == 0) touched.push_back(p);
      neighbour_weight[p] += static_cast<double>(graph.edge_weight_at(static_cast<std::size_t>(i)));
    }
    const double w = static_cast<double>(effective_weight(graph, v));
    std::size_t best = active.front();
    double best_score = -std::numeric_limits<double>::infinity();
    double best_fill = std::numeric_limits<double>::infinity();
    std::size_t least_filled = active.front();
    double least_fill = std::numeric_limits<double>::infinity();
    for (std::size_t p : active) {
      const double fill = load[p] * scale[p];
      if (fill < least_fill) {
        least_fill = fill;
        least_filled = p;
      }
      if (load[p] + w > capacity[p]) continue;
      const double score = neighbour_weight[p] - alpha * kGamma * std::sqrt(fill);
      // Ties (a vertex with no placed neighbours on an empty stream) go to the least filled part.
      if (score > best_score || (score == best_score && fill < best_fill)) {
        best_score = score;
        best_fill = fill;
        best = p;
      }
    }
    if (best_score == -std::numeric_limits<double>::infinity()) {
      best = least_filled;
      ++over_cap;
    }
    result.part[vi] = static_cast<int32_t>(best);
    placed[vi] = 1;
    load[best] += w;
    for (std::size_t p : touched) neighbour_weight[p] = 0;
    touched.clear();
  }
  if (over_cap > 0) {
    result.note = fmt::format("fennel: {} vertices fitted no part under the imbalance cap and went to the least "
                              "filled part",
                              over_cap);
  }
  return result;
}

MethodResult partition_hash(const graphdata::Graph& graph, const std::vector<double>& targets, uint64_t seed) {
  const int32_t n = graph.vertex_count();
  std::vector<double> cumulative(targets.size());
  std::partial_sum(targets.begin(), targets.end(), cumulative.begin());
  std::size_t last_active = 0;
  for (std::size_t p = 0; p < targets.size(); ++p) {
    if (targets[p] > 0) last_active = p;
  }
  MethodResult result;
  result.part.assign(static_cast<std::size_t>(n), 0);
  const uint64_t key = mix64(seed);
  for (int32_t v = 0; v < n; ++v) {
    const double u = static_cast<double>(mix64(key ^ static_cast<uint64_t>(v)) >> 11) * 0x1.0p-53;
    // upper_bound skips zero-width (target 0) intervals; rounding in the sums can leave u past
    // the last bound, which belongs to the last part with a target.
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
    const std::size_t p = it == cumulative.end() ? last_active : static_cast<std::size_t>(it - cumulative.begin());
    result.part[static_cast<std::size_t>(v)] = static_cast<int32_t>(targets[p] > 0 ? p : last_active);
  }
  return result;
}

Status check_imbalance(double imbalance) {
  if (!std::isfinite(imbalance) || imbalance < 1.0 || imbalance > kMaxImbalance) {
    return invalid_argument(fmt::format("imbalance {} is outside 1..{}; 1.03 allows the heaviest part 3% above its "
                                        "target",
                                        imbalance, kMaxImbalance));
  }
  return Status::ok();
}

}  // namespace

Result<PartitionMethod> parse_partition_method(std::string_view name) {
  if (name == "metis") return PartitionMethod::kMetis;
  if (name == "contiguous") return PartitionMethod::kContiguous;
  if (name == "hash") return PartitionMethod::kHash;
  if (name == "chunks") return PartitionMethod::kChunks;
  if (name == "fennel") return PartitionMethod::kFennel;
  return invalid_argument(
      fmt::format("unknown partition method '{}'; use metis, contiguous, chunks, fennel or hash", name));
}

Result<Objective> parse_objective(std::string_view name) {
  if (name == "cut") return Objective::kCut;
  if (name == "volume") return Objective::kVolume;
  return invalid_argument(fmt::format("unknown objective '{}'; use cut or volume", name));
}

std::string_view method_name(PartitionMethod method) {
  switch (method) {
    case PartitionMethod::kMetis: return "metis";
    case PartitionMethod::kContiguous: return "contiguous";
    case PartitionMethod::kHash: return "hash";
    case PartitionMethod::kChunks: return "chunks";
    case PartitionMethod::kFennel: return "fennel";
  }
  return "?";
}

std::string_view objective_name(Objective objective) {
  return objective == Objective::kVolume ? "volume" : "cut";
}

Status metis_status(int metis_code, std::string_view call) {
  switch (metis_code) {
    case METIS_OK:
      return Status::ok();
    case METIS_ERROR_INPUT:
      return invalid_argument(fmt::format("{} rejected its input (METIS_ERROR_INPUT)", call));
    case METIS_ERROR_MEMORY:
      return resource_exhausted(fmt::format("{} ran out of memory (METIS_ERROR_MEMORY)", call));
    case METIS_ERROR:
      return internal_error(fmt::format("{} failed (METIS_ERROR)", call));
    default:
      return internal_error(fmt::format("{} returned unknown code {}", call, metis_code));
  }
}

Result<PartitionQuality> evaluate_partition(const graphdata::Graph& graph, std::span<const int32_t> part,
                                            std::span<const double> target_weights) {
  Result<std::vector<double>> targets = normalise_weights(target_weights);
  if (!targets) return targets.status();
  const int32_t n = graph.vertex_count();
  if (part.size() != static_cast<std::size_t>(n)) {
    return invalid_argument(fmt::format("{} part numbers for {} vertices", part.size(), n));
  }
  const std::size_t k = targets->size();
  PartitionQuality quality;
  quality.parts.resize(k);
  for (std::size_t p = 0; p < k; ++p) quality.parts[p].target = (*targets)[p];
  for (int32_t v = 0; v < n; ++v) {
    const int32_t p = part[static_cast<std::size_t>(v)];
    if (p < 0 || static_cast<std::size_t>(p) >= k) {
      return invalid_argument(fmt::format("vertex {} is in part {}, outside 0..{}", v, p, k - 1));
    }
    quality.parts[static_cast<std::size_t>(p)].weight += graph.vertex_weight(v);
    ++quality.parts[static_cast<std::size_t>(p)].vertices;
  }
  quality.total_weight = graph.total_vertex_weight();
  if (quality.total_weight > 0) {
    quality.imbalance = 0;
    for (const PartQuality& pq : quality.parts) {
      if (pq.target <= 0) continue;
      const double ideal = pq.target * static_cast<double>(quality.total_weight);
      quality.imbalance = std::max(quality.imbalance, static_cast<double>(pq.weight) / ideal);
      quality.max_target_deviation =
          std::max(quality.max_target_deviation, std::abs(static_cast<double>(pq.weight) - ideal) / ideal);
    }
  }
  // seen[p] == v marks part p as already counted among v's neighbours.
  std::vector<int32_t> seen(k, -1);
  const std::vector<int32_t>& xadj = graph.xadj();
  const std::vector<int32_t>& adjncy = graph.adjncy();
  for (int32_t v = 0; v < n; ++v) {
    const int32_t own = part[static_cast<std::size_t>(v)];
    seen[static_cast<std::size_t>(own)] = v;
    for (int32_t i = xadj[static_cast<std::size_t>(v)]; i < xadj[static_cast<std::size_t>(v) + 1]; ++i) {
      const int32_t u = adjncy[static_cast<std::size_t>(i)];
      const int32_t other = part[static_cast<std::size_t>(u)];
      if (other == own) continue;
      if (u > v) quality.edge_cut += graph.edge_weight_at(static_cast<std::size_t>(i));
      if (seen[static_cast<std::size_t>(other)] != v) {
        seen[static_cast<std::size_t>(other)] = v;
        ++quality.comm_volume;
      }
    }
  }
  return quality;
}

Result<Partition> partition_graph(const graphdata::Graph& graph, const PartitionOptions& options) {
  Result<std::vector<double>> normalised = normalise_weights(options.target_weights);
  if (!normalised) return normalised.status().with_context("target weights: ");
  TESSERA_RETURN_IF_ERROR(check_imbalance(options.imbalance));
  if (options.target_weights.size() > static_cast<std::size_t>(graphdata::kMaxGraphIndex)) {
    return invalid_argument(fmt::format("{} parts is above METIS' limit", options.target_weights.size()));
  }
  const std::vector<double>& targets = normalised.value();

  MethodResult method_result;
  switch (options.method) {
    case PartitionMethod::kMetis: {
      Result<MethodResult> metis = partition_metis(graph, options, targets);
      if (!metis) return metis.status();
      method_result = std::move(*metis);
      break;
    }
    case PartitionMethod::kContiguous:
      method_result = partition_contiguous(graph, targets);
      break;
    case PartitionMethod::kHash:
      method_result = partition_hash(graph, targets, options.seed);
      break;
    case PartitionMethod::kChunks:
      method_result = partition_chunks(graph, targets);
      break;
    case PartitionMethod::kFennel:
      method_result = partition_fennel(graph, targets, options.imbalance);
      break;
  }

  // The caller's weights, not the normalised ones: evaluate_partition(graph, part, weights) then
  // reproduces this quality bit for bit.
  Result<PartitionQuality> quality = evaluate_partition(graph, method_result.part, options.target_weights);
  if (!quality) {
    return internal_error(fmt::format("{} produced an invalid partition: {}", method_name(options.method),
                                      quality.status().message()));
  }
  for (std::size_t p = 0; p < targets.size(); ++p) {
    if (targets[p] == 0 && quality->parts[p].vertices > 0) {
      return internal_error(fmt::format("{} put {} vertices in part {}, whose target is 0",
                                        method_name(options.method), quality->parts[p].vertices, p));
    }
  }
  Partition partition;
  partition.part = std::move(method_result.part);
  partition.quality = std::move(*quality);
  partition.note = std::move(method_result.note);
  return partition;
}

// Here rather than in tiling.cpp, beside the partitioner it calls: a worker-only build has the
// tile graph (graph_io reads matrix patterns through it) but no partitioner.
Result<Partition> partition_tiles(std::span<const graphdata::Tile> tiles, const PartitionOptions& options) {
  Result<graphdata::Graph> graph = graphdata::tile_graph(tiles);
  if (!graph) return graph.status();
  return partition_graph(*graph, options);
}

}  // namespace tessera::partition
