// tessera-local-gemm-bench: the yardstick for two uncapped workers on one machine. Times C = A x B
// (n x n doubles, uniform random) on this machine alone, with OpenBLAS using --threads threads,
// the way a user without Tessera would multiply. One warm-up product first (BLAS threads and
// C's pages), then --runs timed products; prints one line per run, "seconds S gflops G", so a
// script can interleave it with cluster runs (scripts/bench-two-workers.sh). A figure generator,
// not a test.
//
//   tessera-local-gemm-bench --n N [--threads T] [--runs R]
#include <chrono>
#include <cstdint>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tessera/linalg/gemm.hpp"
#include "tessera/linalg/matrix.hpp"

namespace linalg = tessera::linalg;

int main(int argc, char** argv) {
  CLI::App app{"C = A x B on this machine alone, with OpenBLAS threads"};
  uint64_t n = 2048;
  int threads = 2;
  int runs = 1;
  app.add_option("--n", n, "matrix size")->check(CLI::Range(uint64_t{1}, uint64_t{32768}));
  app.add_option("--threads", threads, "BLAS threads")->check(CLI::Range(1, 256));
  app.add_option("--runs", runs, "timed products after one warm-up")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  const linalg::Matrix a = linalg::random_matrix(n, n, 1);
  const linalg::Matrix b = linalg::random_matrix(n, n, 2);
  linalg::Matrix c(n, n);
  linalg::set_blas_threads(threads);
  auto multiply = [&] {
    const auto start = std::chrono::steady_clock::now();
    linalg::gemm(n, n, n, 1.0, a.values.data(), n, b.values.data(), n, 0.0, c.values.data(), n);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  multiply();
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  for (int run = 0; run < runs; ++run) {
    const double seconds = multiply();
    std::cout << fmt::format("seconds {:.6f} gflops {:.2f}\n", seconds, flops / seconds / 1e9);
  }
  return 0;
}
