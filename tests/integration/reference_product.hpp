// The product the integration tests compare distributed results with: one local BLAS call.
// With integer-valued inputs every partial sum is exact in float64, so a distributed product must
// equal it bit for bit whatever the order of summation. Pure; thread-safe.
#pragma once

#include "tessera/linalg/matrix.hpp"
#include "tessera/linalg/gemm.hpp"

namespace tessera::balance {

inline linalg::Matrix reference_product(const linalg::Matrix& a, const linalg::Matrix& b) {
  linalg::Matrix c(a.rows, b.cols);
  linalg::gemm(a.rows, b.cols, a.cols, 1.0, a.values.data(), a.cols, b.values.data(), b.cols, 0.0, c.values.data(),
               b.cols);
  return c;
}

}  // namespace tessera::balance
