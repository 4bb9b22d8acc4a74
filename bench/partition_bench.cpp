// tessera-partition-bench: metis vs contiguous vs hash on generated and shipped graphs, for equal
// and 0.4/0.2/0.2/0.2 part weights; prints a markdown table for docs/partition.md. A figure
// generator, not a test: it asserts nothing and its times depend on the machine.
//
//   tessera-partition-bench [--seed S] [--instances DIR]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/partition/generators.hpp"
#include "tessera/partition/graph_io.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tp = tessera::partition;

namespace {

struct Instance {
  std::string name;
  tp::Graph graph;
};

struct WeightSet {
  std::string name;
  std::vector<double> weights;
};

}  // namespace

int main(int argc, char** argv) {
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
    tessera::Result<tp::Graph> graph = tp::generate_graph(spec, seed);
    if (!graph) {
      std::fprintf(stderr, "%s\n", graph.status().to_string().c_str());
      return 1;
    }
    graphs.push_back({spec, std::move(*graph)});
  }
  tessera::Result<tp::Graph> karate = tp::read_graph_file(instances + "/karate.mtx");
  if (!karate) {
    std::fprintf(stderr, "%s\n", karate.status().to_string().c_str());
    return 1;
  }
  graphs.push_back({"karate.mtx", std::move(*karate)});

  const std::vector<WeightSet> weight_sets = {{"equal", {1, 1, 1, 1}}, {"0.4/0.2/0.2/0.2", {0.4, 0.2, 0.2, 0.2}}};
  const std::vector<tp::PartitionMethod> methods = {tp::PartitionMethod::kMetis, tp::PartitionMethod::kContiguous,
                                                    tp::PartitionMethod::kHash};

  fmt::print("Instances (seed {}):\n\n", seed);
  for (const Instance& instance : graphs) fmt::print("- `{}`: {}\n", instance.name, tp::describe(instance.graph));
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
