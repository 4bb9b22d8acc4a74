// What the tests of `tessera experiment` on its own small clusters share: a cluster file of two
// unthrottled loopback workers that the study starts and stops itself, the pids of whatever of it
// is still alive (so a failed study's workers die with the test), and the studies' CSV files read
// by column name.
#pragma once

#include <signal.h>

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "process_fixture.hpp"
#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/emulation/local_cluster.hpp"

namespace tessera::testing {

// A study's CSVs hold no quoted cells: a row is its cells split at commas, by column name. Every
// row must have as many cells as the header.
inline std::vector<std::map<std::string, std::string>> read_study_csv(const std::string& path,
                                                                      std::vector<std::string>* header) {
  const auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream text(line);
    for (std::string cell; std::getline(text, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
  };
  std::istringstream text(read_file(path));
  std::string line;
  std::getline(text, line);
  *header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(text, line)) {
    const std::vector<std::string> cells = split(line);
    EXPECT_EQ(cells.size(), header->size()) << line;
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header->size() && i < cells.size(); ++i) row[(*header)[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

// dir_/cluster.yaml: cluster `cluster` of nodes a and b on loopback, one thread each, for a study
// to bring up with its run directory in dir_/run. `also_named`: the clusters the study derives
// from it under other names (a node-count sweep runs "NAME-n1"), whose workers are watched too.
class TwoNodeStudyTest : public ::testing::Test {
 protected:
  TwoNodeStudyTest(std::string cluster, std::string secret, std::vector<std::string> also_named = {})
      : cluster_(std::move(cluster)), secret_(std::move(secret)), also_named_(std::move(also_named)) {}

  void SetUp() override {
    const std::vector<uint16_t> ports = free_loopback_ports(2);
    write_file(dir_.file("cluster.yaml"), "cluster: " + cluster_ + "\nsecret: " + secret_ +
                                              "\nnodes:\n"
                                              "  - {name: a, host: 127.0.0.1, port: " + std::to_string(ports[0]) +
                                              ", threads: 1}\n"
                                              "  - {name: b, host: 127.0.0.1, port: " + std::to_string(ports[1]) +
                                              ", threads: 1}\n");
  }

  // Whatever happened, no worker of the study survives the test.
  void TearDown() override {
    for (int pid : live_workers()) ::kill(pid, SIGKILL);
  }

  // The pids of the workers of this cluster (and of those derived from it) still running.
  std::vector<int> live_workers() {
    Result<balance::cluster::ClusterSpec> spec = balance::cluster::load_cluster_spec(dir_.file("cluster.yaml"));
    if (!spec) return {};
    std::vector<int> pids = emulation::local_cluster_pids(*spec, {dir_.file("run"), "", {}});
    for (const std::string& name : also_named_) {
      spec->name = name;
      for (int pid : emulation::local_cluster_pids(*spec, {dir_.file("run"), "", {}})) pids.push_back(pid);
    }
    return pids;
  }

  TempDir dir_;

 private:
  const std::string cluster_;
  const std::string secret_;
  const std::vector<std::string> also_named_;
};

}  // namespace tessera::testing
