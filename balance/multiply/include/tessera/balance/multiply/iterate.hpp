// Iterative methods over a matrix kept on the nodes (resident.hpp): each step is one resident
// product by a vector, so only vectors travel, and the vector arithmetic between steps is done
// here. Every product is checked (resident.hpp's check); a product that fails it stops the method
// with kVerificationFailed. The answer is checked once more at the end by its true residual,
// from one more checked product: power iteration's ||A v - value v|| / |value|, conjugate
// gradient's ||b - A x|| / ||b||.
//
// The methods are written once over a VectorProduct, so that the same steps run on the nodes (the
// resident overloads) and on one core here (local_product: the study's single-node baseline).
//
// Ownership: the caller owns the connection and the resident matrix. Not reentrant on one
// connection. `cancel` (may be null) stops between steps with kCancelled.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/multiply/resident.hpp"
#include "tessera/core/status.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::multiply {

// y = A v for the method's square A of `rows` rows, checked where the product says so (a failed
// check is kVerificationFailed). y is resized by the callee.
struct VectorProduct {
  uint64_t rows = 0;
  std::function<Status(std::span<const double> v, std::vector<double>& y)> apply;
};

// What lets a resident product survive a lost node (multiply_resident_surviving): the matrix
// placed, kept unchanged by the caller, and who hears of a loss (may be empty).
struct ResidentSurvival {
  linalg::MatrixView source;
  std::function<void(const std::string&)> on_lost;
};

// A resident matrix's checked product on the nodes; each product's bytes both ways are added to
// *bytes_moved when it is given. With `survival`, a lost node's rows are placed again on the
// others and the product runs again.
VectorProduct resident_product(cluster::ClusterConnection& cluster, ResidentMatrix& a, uint64_t* bytes_moved = nullptr,
                               const ResidentSurvival* survival = nullptr);
// The same product with BLAS on this thread (`a` is borrowed; unchecked: nothing travels).
VectorProduct local_product(linalg::MatrixView a);

struct PowerOptions {
  uint32_t iterations = 1000;  // at most this many steps
  double tol = 1e-10;          // stop when the eigenvalue estimate moves by at most tol, relative
  uint64_t seed = 1;           // the start vector's
};

struct IterationOutcome {
  std::vector<double> vector;  // power: the unit eigenvector; cg: the solution x
  double value = 0.0;          // power: the eigenvalue; cg: unused
  uint32_t iterations = 0;
  double residual = 0.0;       // the true relative residual, from one more checked product
  bool converged = false;      // power: the estimate settled; cg: the true residual within tol
  double seconds = 0.0;
  double product_seconds = 0.0;  // of which in products (the nodes' share of the time)
  std::vector<double> step_seconds;  // each step's, product and vector arithmetic (not the final check)
  uint64_t bytes_moved = 0;          // resident: every product's bytes to and from the nodes
};

// The dominant eigenpair of a square resident matrix. kInvalidArgument for a matrix that is not
// square, or a start vector A maps to zero.
Result<IterationOutcome> power_iteration(const VectorProduct& product, const PowerOptions& options,
                                         const std::atomic<bool>* cancel = nullptr);
Result<IterationOutcome> power_iteration(cluster::ClusterConnection& cluster, ResidentMatrix& a,
                                         const PowerOptions& options, const std::atomic<bool>* cancel = nullptr,
                                         const ResidentSurvival* survival = nullptr);

struct CgOptions {
  double tol = 1e-10;           // on ||b - A x|| / ||b||
  uint32_t max_iterations = 0;  // 0: 10 n
};

// x with A x = b for a symmetric positive definite resident A. Stops when the recurrence's
// residual is within tol, then checks the true one: converged when it is within tol (or within
// the rounding a product leaves, 10 n eps). kInvalidArgument for a matrix that is not square, b of
// the wrong length, or p^T A p <= 0 (A is not positive definite); kVerificationFailed when the
// recurrence converged but the true residual is far from it.
Result<IterationOutcome> conjugate_gradient(const VectorProduct& product, std::span<const double> b,
                                            const CgOptions& options, const std::atomic<bool>* cancel = nullptr);
Result<IterationOutcome> conjugate_gradient(cluster::ClusterConnection& cluster, ResidentMatrix& a,
                                            std::span<const double> b, const CgOptions& options,
                                            const std::atomic<bool>* cancel = nullptr,
                                            const ResidentSurvival* survival = nullptr);

}  // namespace tessera::balance::multiply
