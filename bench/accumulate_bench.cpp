// tessera-accumulate-bench: how should T compute threads add many partial products into one shared
// C block? Measured on the worker's own kernel (tessera::worker::gemm, single-threaded BLAS per
// call), for C of size x size and a depth split into k-panels (one job per panel, as the
// coordinator streams them):
//   strips  what ComputePool does: one job at a time, split into row strips of C, no locks (the
//           real tessera::worker::ComputePool runs it);
//   mutex   each thread takes whole jobs, computes A_p * B_p into a private scratch block, then
//           adds the scratch into C block by block, each of blocks x blocks blocks under its own
//           std::mutex;
//   atomic  as mutex, but the add is std::atomic_ref<double>::fetch_add per element, no lock.
// Prints the median wall time of --repeat runs, GFLOP/s and the ratio to strips; checks every
// method's C against a reference within a rounding bound and exits 1 if one is off. A figure
// generator, not a test: its times depend on the machine.
//
//   tessera-accumulate-bench [--threads T] [--size N] [--depth K] [--panels 64,128,256]
//                            [--repeat R] [--blocks B] [--seed S] [--json PATH|-]
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/core/stats.hpp"
#include "tessera/worker/compute_pool.hpp"
#include "tessera/linalg/gemm.hpp"

namespace tw = tessera::worker;

namespace {

using Clock = std::chrono::steady_clock;

enum class Method { kStrips, kMutex, kAtomic };

const char* method_name(Method method) {
  switch (method) {
    case Method::kStrips: return "strips";
    case Method::kMutex: return "mutex";
    case Method::kAtomic: return "atomic";
  }
  return "?";
}

// A = [A_0 | A_1 | ...] (size x depth) and B = [B_0; B_1; ...] (depth x size), each panel stored
// contiguously the way the worker stores the tiles of its jobs.
struct Panels {
  std::size_t size = 0;
  std::vector<std::size_t> widths;
  std::vector<std::vector<double>> a;  // size x widths[p]
  std::vector<std::vector<double>> b;  // widths[p] x size
};

Panels split(const std::vector<double>& a, const std::vector<double>& b, std::size_t size, std::size_t depth,
             std::size_t panel) {
  Panels panels;
  panels.size = size;
  for (std::size_t first = 0; first < depth; first += panel) {
    const std::size_t width = std::min(panel, depth - first);
    std::vector<double> a_panel(size * width), b_panel(width * size);
    for (std::size_t i = 0; i < size; ++i)
      std::copy_n(a.begin() + static_cast<std::ptrdiff_t>(i * depth + first), width,
                  a_panel.begin() + static_cast<std::ptrdiff_t>(i * width));
    std::copy_n(b.begin() + static_cast<std::ptrdiff_t>(first * size), width * size, b_panel.begin());
    panels.widths.push_back(width);
    panels.a.push_back(std::move(a_panel));
    panels.b.push_back(std::move(b_panel));
  }
  return panels;
}

// One block of C in the blocks x blocks grid: rows [row0, row1), columns [col0, col1).
struct Block {
  std::size_t row0, row1, col0, col1;
};

std::vector<Block> grid(std::size_t size, std::size_t blocks) {
  std::vector<Block> out;
  for (std::size_t bi = 0; bi < blocks; ++bi)
    for (std::size_t bj = 0; bj < blocks; ++bj)
      out.push_back({bi * size / blocks, (bi + 1) * size / blocks, bj * size / blocks, (bj + 1) * size / blocks});
  return out;
}

double run_strips(tw::ComputePool& pool, const Panels& panels, std::vector<double>& c) {
  const std::size_t n = panels.size;
  const auto start = Clock::now();
  for (std::size_t p = 0; p < panels.widths.size(); ++p) {
    const std::size_t k = panels.widths[p];
    pool.submit(tw::GemmTask{n, n, k, panels.a[p].data(), k, panels.b[p].data(), n, c.data(), n}, {});
  }
  pool.wait_idle();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Threads take whole jobs from a shared counter; each computes its product into its own scratch
// and adds it into C. Every thread starts its adds at a different block so that, with as many
// blocks as threads or more, two adds rarely want the same block at the same moment.
double run_private(Method method, uint32_t threads, const Panels& panels, std::size_t blocks,
                   std::vector<double>& c, std::vector<std::vector<double>>& scratch) {
  const std::size_t n = panels.size;
  const std::vector<Block> cells = grid(n, blocks);
  std::vector<std::mutex> locks(cells.size());
  std::atomic<std::size_t> next_job{0};
  std::barrier start_line(static_cast<std::ptrdiff_t>(threads) + 1);

  auto add_block = [&](const Block& block, const double* s) {
    for (std::size_t i = block.row0; i < block.row1; ++i) {
      double* c_row = c.data() + i * n;
      const double* s_row = s + i * n;
      if (method == Method::kMutex) {
        for (std::size_t j = block.col0; j < block.col1; ++j) c_row[j] += s_row[j];
      } else {
        for (std::size_t j = block.col0; j < block.col1; ++j) {
          std::atomic_ref<double>(c_row[j]).fetch_add(s_row[j], std::memory_order_relaxed);
        }
      }
    }
  };

  std::vector<std::jthread> team;
  team.reserve(threads);
  for (uint32_t t = 0; t < threads; ++t) {
    team.emplace_back([&, t] {
      double* s = scratch[t].data();
      start_line.arrive_and_wait();
      for (std::size_t p = next_job++; p < panels.widths.size(); p = next_job++) {
        const std::size_t k = panels.widths[p];
        tessera::linalg::gemm(n, n, k, 1.0, panels.a[p].data(), k, panels.b[p].data(), n, 0.0, s, n);
        for (std::size_t step = 0; step < cells.size(); ++step) {
          const std::size_t cell = (step + t * cells.size() / threads) % cells.size();
          if (method == Method::kMutex) {
            std::lock_guard lock(locks[cell]);
            add_block(cells[cell], s);
          } else {
            add_block(cells[cell], s);
          }
        }
      }
    });
  }
  start_line.arrive_and_wait();
  const auto start = Clock::now();
  team.clear();  // joins
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double max_abs_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

struct Row {
  Method method;
  std::size_t panel = 0;
  std::size_t jobs = 0;
  double median_seconds = 0.0;
  double gflops = 0.0;
  double vs_strips = 0.0;
  double max_diff = 0.0;
  bool ok = false;
};

void print_table(const std::vector<Row>& rows, std::size_t size, std::size_t depth, uint32_t threads,
                 std::size_t blocks, int repeat, double tolerance) {
  fmt::print("C {0} x {0}, depth {1}, {2} threads, {3}x{3} lock blocks, median of {4} runs; BLAS: {5}\n", size,
             depth, threads, blocks, repeat, tessera::linalg::blas_description());
  fmt::print("rounding bound for max |C - reference|: {:.3g}\n\n", tolerance);
  fmt::print("{:<8} {:>7} {:>5} {:>11} {:>9} {:>10} {:>12}  {}\n", "method", "k-panel", "jobs", "median (s)",
             "GFLOP/s", "vs strips", "max |diff|", "check");
  for (const Row& row : rows) {
    fmt::print("{:<8} {:>7} {:>5} {:>11.4f} {:>9.2f} {:>10.3f} {:>12.3g}  {}\n", method_name(row.method), row.panel,
               row.jobs, row.median_seconds, row.gflops, row.vs_strips, row.max_diff, row.ok ? "ok" : "FAILED");
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t threads = 2;
  std::size_t size = 1024;
  std::size_t depth = 1024;
  std::vector<std::size_t> panel_widths = {64, 128, 256};
  int repeat = 5;
  std::size_t blocks = 4;
  uint64_t seed = 1;
  std::string json_path;

  CLI::App app{"tessera-accumulate-bench: strips vs per-block mutex vs atomic adds into one shared C"};
  app.add_option("--threads", threads, "compute threads")->capture_default_str()->check(CLI::Range(1u, 256u));
  app.add_option("--size", size, "C is size x size")->capture_default_str()->check(CLI::Range(1ul, 16384ul));
  app.add_option("--depth", depth, "inner dimension, split into k-panels")
      ->capture_default_str()
      ->check(CLI::Range(1ul, 65536ul));
  app.add_option("--panels", panel_widths, "k-panel widths to compare")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1ul, 65536ul));
  app.add_option("--repeat", repeat, "runs per configuration; the median is reported")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--blocks", blocks, "mutex/atomic: C is split into blocks x blocks lock blocks")
      ->capture_default_str()
      ->check(CLI::Range(1ul, 1024ul));
  app.add_option("--seed", seed, "random operands")->capture_default_str();
  app.add_option("--json", json_path, "also write the results as JSON to PATH (- for stdout)");
  CLI11_PARSE(app, argc, argv);
  blocks = std::min(blocks, size);

  tessera::linalg::set_blas_threads(1);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> a(size * depth), b(depth * size);
  for (double& x : a) x = uniform(random);
  for (double& x : b) x = uniform(random);

  // Reference in one call, and the rounding bound every method must meet: summing k products in
  // any order errs by at most gamma_k * (|A| |B|) elementwise, gamma_k ~ k * eps (the standard
  // inner-product bound); two results may err in opposite directions, hence the factor 2.
  std::vector<double> reference(size * size), magnitude(size * size);
  tessera::linalg::gemm(size, size, depth, 1.0, a.data(), depth, b.data(), size, 0.0, reference.data(), size);
  {
    std::vector<double> abs_a(a), abs_b(b);
    for (double& x : abs_a) x = std::abs(x);
    for (double& x : abs_b) x = std::abs(x);
    tessera::linalg::gemm(size, size, depth, 1.0, abs_a.data(), depth, abs_b.data(), size, 0.0, magnitude.data(), size);
  }
  const double eps = std::numeric_limits<double>::epsilon();
  const double tolerance =
      2.0 * static_cast<double>(depth + 2) * eps * *std::max_element(magnitude.begin(), magnitude.end());

  tw::ComputePool pool(threads);
  std::vector<std::vector<double>> scratch(threads, std::vector<double>(size * size));
  std::vector<double> c(size * size);
  const double flops = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(depth);

  std::vector<Row> rows;
  bool all_ok = true;
  for (std::size_t panel : panel_widths) {
    const Panels panels = split(a, b, size, depth, panel);
    double strips_median = 0.0;
    for (Method method : {Method::kStrips, Method::kMutex, Method::kAtomic}) {
      std::vector<double> seconds;
      double worst = 0.0;
      // One untimed run first: pages of C and the scratch blocks are touched, BLAS buffers exist.
      for (int run = 0; run <= repeat; ++run) {
        std::fill(c.begin(), c.end(), 0.0);
        const double s = method == Method::kStrips ? run_strips(pool, panels, c)
                                                   : run_private(method, threads, panels, blocks, c, scratch);
        if (run > 0) seconds.push_back(s);
        worst = std::max(worst, max_abs_diff(c, reference));
      }
      Row row;
      row.method = method;
      row.panel = panel;
      row.jobs = panels.widths.size();
      row.median_seconds = tessera::median(seconds);
      row.gflops = row.median_seconds > 0.0 ? flops / row.median_seconds / 1e9 : 0.0;
      if (method == Method::kStrips) strips_median = row.median_seconds;
      row.vs_strips = strips_median > 0.0 ? row.median_seconds / strips_median : 0.0;
      row.max_diff = worst;
      row.ok = std::isfinite(worst) && worst <= tolerance;
      all_ok = all_ok && row.ok;
      rows.push_back(row);
    }
  }

  const bool json_to_stdout = json_path == "-";
  if (!json_to_stdout) print_table(rows, size, depth, threads, blocks, repeat, tolerance);

  if (!json_path.empty()) {
    nlohmann::json out;
    out["size"] = size;
    out["depth"] = depth;
    out["threads"] = threads;
    out["blocks"] = blocks;
    out["repeat"] = repeat;
    out["seed"] = seed;
    out["blas"] = tessera::linalg::blas_description();
    out["tolerance"] = tolerance;
    out["results"] = nlohmann::json::array();
    for (const Row& row : rows) {
      out["results"].push_back({{"method", method_name(row.method)},
                                {"panel", row.panel},
                                {"jobs", row.jobs},
                                {"median_seconds", row.median_seconds},
                                {"gflops", row.gflops},
                                {"vs_strips", row.vs_strips},
                                {"max_abs_diff", row.max_diff},
                                {"ok", row.ok}});
    }
    if (json_to_stdout) {
      std::cout << out.dump(2) << "\n";
    } else {
      std::ofstream file(json_path);
      file << out.dump(2) << "\n";
      if (!file) {
        fmt::print(stderr, "tessera-accumulate-bench: cannot write {}\n", json_path);
        return 1;
      }
    }
  }
  if (!all_ok) {
    fmt::print(stderr, "tessera-accumulate-bench: a method's C differs from the reference beyond {:.3g}\n",
               tolerance);
    return 1;
  }
  return 0;
}
