// The only translation unit that sees the BLAS vendor's header (see gemm.hpp).
#include "tessera/linalg/gemm.hpp"

#include <cblas.h>

#include <string>

namespace tessera::linalg {

namespace {

// CBLAS takes int dimensions; every caller already bounds sizes by the protocol's tile limits
// (2^20), so the narrowing cannot overflow.
int blas_int(std::size_t value) { return static_cast<int>(value); }

}  // namespace

void gemm(std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a, std::size_t lda,
          const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
  gemm_ex(false, false, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_ex(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
             const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
             std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // BLAS rejects lda < 1 and some builds mishandle k == 0; the product is empty, so only beta acts.
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0 ? 0.0 : beta * c[i * ldc + j];
    return;
  }
  if (n == 1 && m > 1) {
    // C's column = alpha op(A) b + beta C's column. op(A) is A (stored m x k) or A^T (stored k x m);
    // b is B's column (stored k x 1, stride ldb) or, transposed, B's row (stored 1 x k).
    if (transpose_a) {
      cblas_dgemv(CblasRowMajor, CblasTrans, blas_int(k), blas_int(m), alpha, a, blas_int(lda), b,
                  transpose_b ? 1 : blas_int(ldb), beta, c, blas_int(ldc));
    } else {
      cblas_dgemv(CblasRowMajor, CblasNoTrans, blas_int(m), blas_int(k), alpha, a, blas_int(lda), b,
                  transpose_b ? 1 : blas_int(ldb), beta, c, blas_int(ldc));
    }
    return;
  }
  if (m == 1) {
    // C's row = alpha a op(B) + beta C's row, that is C^T = alpha op(B)^T a^T + beta C^T. op(B) is
    // B (stored k x n) or B^T (stored n x k); a is A's row (stored 1 x k) or, transposed, A's
    // column (stored k x 1, stride lda).
    const int a_stride = transpose_a ? blas_int(lda) : 1;
    if (transpose_b) {
      cblas_dgemv(CblasRowMajor, CblasNoTrans, blas_int(n), blas_int(k), alpha, b, blas_int(ldb), a, a_stride,
                  beta, c, 1);
    } else {
      cblas_dgemv(CblasRowMajor, CblasTrans, blas_int(k), blas_int(n), alpha, b, blas_int(ldb), a, a_stride,
                  beta, c, 1);
    }
    return;
  }
  cblas_dgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
              blas_int(m), blas_int(n), blas_int(k), alpha, a, blas_int(lda), b, blas_int(ldb), beta, c,
              blas_int(ldc));
}

void gemv(std::size_t m, std::size_t n, const double* a, std::size_t lda, const double* x, double* y) {
  if (m == 0) return;
  cblas_dgemv(CblasRowMajor, CblasNoTrans, blas_int(m), blas_int(n), 1.0, a, blas_int(lda), x, 1, 0.0, y,
              1);
}

void set_blas_threads(int threads) { openblas_set_num_threads(threads < 1 ? 1 : threads); }

std::string blas_description() {
  const char* config = openblas_get_config();
  if (config == nullptr) return "OpenBLAS (configuration unknown)";
  std::string description(config);
  // Releases disagree on whether the config string names the library; say it once either way.
  return description.rfind("OpenBLAS", 0) == 0 ? description : "OpenBLAS " + description;
}

}  // namespace tessera::linalg
