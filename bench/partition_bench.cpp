// tessera-partition-bench: metis vs contiguous vs chunks vs fennel vs hash on generated and
// shipped graphs, for equal and 0.4/0.2/0.2/0.2 part weights; prints a markdown table for
// docs/partition.md. A figure generator, not a test: it asserts nothing and its times depend on
// the machine.
//
//   tessera-partition-bench [--seed S] [--instances DIR]
//   tessera-partition-bench --placement [--seed S] [--repeat R] [--weights 4,1,1,1] [--cache-dir DIR]
//                           [GRAPH ...]
// --placement partitions what the coordinator places, placement_graph(g) of the directed graph
// (vertex weight = out-degree + 1), for the large graphs of a graph run (default rmat:18, rmat:20,
// lognormal:100000, mesh2d:1000x1000 and METIS' copter2 and mdual when libmetis-doc is
// installed), and prints the median of R runs (default 3) of each method's time, with its cut,
// and what the placement cache costs: the graph hash, a store and a load.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/graphdata/digraph.hpp"
#include "tessera/graphdata/generators.hpp"
#include "tessera/graphdata/graph_io.hpp"
#include "tessera/partition/graph_partition.hpp"
#include "tessera/partition/placement_cache.hpp"

namespace tp = tessera::partition;
namespace graphdata = tessera::graphdata;

namespace {

struct Instance {
  std::string name;
  graphdata::Graph graph;
};

struct WeightSet {
  std::string name;
  std::vector<double> weights;
};

const std::vector<tp::PartitionMethod> kAllMethods = {tp::PartitionMethod::kMetis, tp::PartitionMethod::kChunks,
                                                     tp::PartitionMethod::kFennel, tp::PartitionMethod::kContiguous,
                                                     tp::PartitionMethod::kHash};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::vector<double> parse_weights(const std::string& text) {
  std::vector<double> weights;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    weights.push_back(std::strtod(text.substr(start, comma - start).c_str(), nullptr));
    start = comma + 1;
  }
  return weights;
}

int placement_bench(int argc, char** argv) {
  uint64_t seed = 1;
  int repeat = 3;
  std::string weights_text = "4,1,1,1";
  std::filesystem::path cache_dir = std::filesystem::temp_directory_path() / "tessera-partition-bench-cache";
  std::vector<std::string> specs;
  for (int i = 2; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--seed") == 0 && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--repeat") == 0 && has_value) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--weights") == 0 && has_value) {
      weights_text = argv[++i];
    } else if (std::strcmp(argv[i], "--cache-dir") == 0 && has_value) {
      cache_dir = argv[++i];
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "usage: tessera-partition-bench --placement [--seed S] [--repeat R] [--weights W] "
                           "[--cache-dir DIR] [GRAPH ...]\n");
      return 2;
    } else {
      specs.emplace_back(argv[i]);
    }
  }
  if (specs.empty()) {
    specs = {"rmat:18", "rmat:20", "lognormal:100000", "mesh2d:1000x1000"};
    for (const char* name : {"copter2", "mdual"}) {
      const std::string path = std::string("/usr/share/doc/libmetis-dev/examples/graphs/") + name + ".graph";
      if (std::filesystem::exists(path)) specs.push_back(path);
    }
  }
  const std::vector<double> weights = parse_weights(weights_text);
  fmt::print("Placement of placement_graph(g), weights {}, seed {}, median of {} runs:\n\n", weights_text, seed,
             repeat);
  fmt::print("| graph | vertices | edges | method | time (s) | edge cut | cut / hash cut | imbalance | max \\|w-t\\|/t |\n");
  fmt::print("|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
  std::vector<std::string> cache_lines;
  for (const std::string& spec : specs) {
    tessera::Result<graphdata::DirectedGraph> directed = graphdata::is_generator_spec(spec)
                                                      ? graphdata::generate_directed_graph(spec, seed)
                                                      : graphdata::read_directed_graph_file(spec);
    if (!directed) {
      std::fprintf(stderr, "%s: %s\n", spec.c_str(), directed.status().to_string().c_str());
      return 1;
    }
    tessera::Result<graphdata::Graph> graph = graphdata::placement_graph(*directed);
    if (!graph) {
      std::fprintf(stderr, "%s: %s\n", spec.c_str(), graph.status().to_string().c_str());
      return 1;
    }
    const std::string name = std::filesystem::path(spec).filename().string();
    std::vector<std::pair<tp::PartitionMethod, tp::Partition>> results;
    std::vector<double> method_seconds;
    for (tp::PartitionMethod method : kAllMethods) {
      tp::PartitionOptions options;
      options.method = method;
      options.target_weights = weights;
      options.seed = seed;
      std::vector<double> times;
      tessera::Result<tp::Partition> partition = tessera::internal_error("not run");
      for (int r = 0; r < repeat; ++r) {
        const auto start = std::chrono::steady_clock::now();
        partition = tp::partition_graph(*graph, options);
        times.push_back(seconds_since(start));
        if (!partition) {
          std::fprintf(stderr, "%s %s: %s\n", spec.c_str(), std::string(tp::method_name(method)).c_str(),
                       partition.status().to_string().c_str());
          return 1;
        }
      }
      method_seconds.push_back(median(times));
      results.emplace_back(method, std::move(*partition));
    }
    const double hash_cut = static_cast<double>(results.back().second.quality.edge_cut);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const tp::PartitionQuality& quality = results[i].second.quality;
      fmt::print("| {} | {} | {} | {} | {:.3f} | {} | {:.3f} | {:.3f} | {:.3f} |\n", name, graph->vertex_count(),
                 graph->edge_count(), tp::method_name(results[i].first), method_seconds[i], quality.edge_cut,
                 hash_cut > 0 ? static_cast<double>(quality.edge_cut) / hash_cut : 0.0, quality.imbalance,
                 quality.max_target_deviation);
    }
    // The cache's price on this graph: key (hash), store and load of the METIS result.
    tp::PartitionOptions options;
    options.target_weights = weights;
    options.seed = seed;
    std::vector<double> key_times, store_times, load_times;
    for (int r = 0; r < repeat; ++r) {
      auto start = std::chrono::steady_clock::now();
      tessera::Result<tp::PlacementKey> key = tp::placement_key(*graph, options);
      key_times.push_back(seconds_since(start));
      if (!key) return 1;
      start = std::chrono::steady_clock::now();
      const tessera::Status stored = tp::store_placement(cache_dir, *key, results.front().second);
      store_times.push_back(seconds_since(start));
      if (!stored.is_ok()) {
        std::fprintf(stderr, "%s\n", stored.to_string().c_str());
        return 1;
      }
      std::string reason;
      start = std::chrono::steady_clock::now();
      tessera::Result<std::optional<tp::Partition>> loaded = tp::load_placement(cache_dir, *key, *graph, &reason);
      load_times.push_back(seconds_since(start));
      if (!loaded || !loaded->has_value() || (*loaded)->part != results.front().second.part) {
        std::fprintf(stderr, "%s: cache did not return the stored placement: %s\n", spec.c_str(), reason.c_str());
        return 1;
      }
    }
    cache_lines.push_back(fmt::format("| {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} |", name, median(key_times),
                                      median(store_times), median(load_times), method_seconds.front()));
  }
  fmt::print("\nPlacement cache (median of {} runs; the load includes recomputing the quality):\n\n", repeat);
  fmt::print("| graph | key: hash (s) | store (s) | load (s) | metis (s) |\n|---|---:|---:|---:|---:|\n");
  for (const std::string& line : cache_lines) fmt::print("{}\n", line);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--placement") == 0) return placement_bench(argc, argv);
  uint64_t seed = 1;
  std::string instances = std::string(TESSERA_SOURCE_DIR) + "/tests/instances/graphs";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seed") == 0) {
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--instances") == 0) {
      instances = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: tessera-partition-bench [--seed S] [--instances DIR]\n");
      return 2;
    }
  }

  std::vector<Instance> graphs;
  for (const char* spec : {"mesh2d:200x200", "mesh3d:30x30x30", "rmat:16", "lognormal:50000"}) {
    tessera::Result<graphdata::Graph> graph = graphdata::generate_graph(spec, seed);
    if (!graph) {
      std::fprintf(stderr, "%s\n", graph.status().to_string().c_str());
      return 1;
    }
    graphs.push_back({spec, std::move(*graph)});
  }
  tessera::Result<graphdata::Graph> karate = graphdata::read_graph_file(instances + "/karate.mtx");
  if (!karate) {
    std::fprintf(stderr, "%s\n", karate.status().to_string().c_str());
    return 1;
  }
  graphs.push_back({"karate.mtx", std::move(*karate)});

  const std::vector<WeightSet> weight_sets = {{"equal", {1, 1, 1, 1}}, {"0.4/0.2/0.2/0.2", {0.4, 0.2, 0.2, 0.2}}};
  const std::vector<tp::PartitionMethod>& methods = kAllMethods;

  fmt::print("Instances (seed {}):\n\n", seed);
  for (const Instance& instance : graphs) fmt::print("- `{}`: {}\n", instance.name, graphdata::describe(instance.graph));
  fmt::print("\n| instance | weights | method | imbalance | max \\|w-t\\|/t | edge cut | comm volume | time (ms) |\n");
  fmt::print("|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const Instance& instance : graphs) {
    for (const WeightSet& weights : weight_sets) {
      for (tp::PartitionMethod method : methods) {
        tp::PartitionOptions options;
        options.method = method;
        options.target_weights = weights.weights;
        options.seed = seed;
        const auto start = std::chrono::steady_clock::now();
        tessera::Result<tp::Partition> partition = tp::partition_graph(instance.graph, options);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (!partition) {
          std::fprintf(stderr, "%s %s: %s\n", instance.name.c_str(), std::string(tp::method_name(method)).c_str(),
                       partition.status().to_string().c_str());
          return 1;
        }
        const tp::PartitionQuality& quality = partition->quality;
        fmt::print("| {} | {} | {} | {:.4f} | {:.4f} | {} | {} | {:.1f} |\n", instance.name, weights.name,
                   tp::method_name(method), quality.imbalance, quality.max_target_deviation, quality.edge_cut,
                   quality.comm_volume, ms);
      }
    }
  }
  return 0;
}
