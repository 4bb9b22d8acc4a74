// The BLAS kernels Tessera needs, behind a vendor-free interface. Only gemm.cpp includes cblas.h,
// so switching OpenBLAS for BLIS or MKL touches one file.
//
// All matrices are row-major with explicit leading dimensions. Functions are thread-safe when
// called on disjoint output memory (Debian's OpenBLAS is built with locking).
#pragma once

#include <cstddef>
#include <string>

namespace tessera::linalg {

// C[m x n] = alpha * A[m x k] * B[k x n] + beta * C.
void gemm(std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a, std::size_t lda,
          const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc);

// C[m x n] = alpha * op(A) * op(B) + beta * C, where op(A) is m x k and op(B) is k x n. With
// transpose_a, op(A) = A^T and A is stored k x m (lda >= m); with transpose_b, op(B) = B^T and B
// is stored n x k (ldb >= k). Lets a job multiply by a stored tile's transpose without copying it.
// A product with a vector on either side (n == 1 or m == 1) runs as a matrix-vector product
// (dgemv): OpenBLAS's dgemm packs the whole matrix operand first, a copy of all its bytes that a
// product with one vector (memory-bound, each byte used once) never earns back.
void gemm_ex(bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
             const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
             std::size_t ldc);

// C += A * B, the in-place accumulation every job performs.
inline void gemm_accumulate(std::size_t m, std::size_t n, std::size_t k, const double* a, std::size_t lda,
                            const double* b, std::size_t ldb, double* c, std::size_t ldc) {
  gemm(m, n, k, 1.0, a, lda, b, ldb, 1.0, c, ldc);
}

// y[m] = A[m x n] * x[n] (beta 0).
void gemv(std::size_t m, std::size_t n, const double* a, std::size_t lda, const double* x, double* y);

// Threads BLAS itself may use per call. Tessera's compute pools call with 1 and parallelise over
// row strips themselves, so BLAS never spins threads of its own under a cgroup quota.
void set_blas_threads(int threads);

// "OpenBLAS 0.3.21 ..." for reports.
std::string blas_description();

}  // namespace tessera::linalg
