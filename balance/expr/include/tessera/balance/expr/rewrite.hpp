// Rewriting an expression by cost before it is computed: the same value with fewer flops.
//
// - Powers are lowered in context. Inside a product chain a power P^k may either become k
//   factors of the chain (so u * P^8 is eight vector-matrix products, 16 n^2 flops) or one factor
//   computed by repeated squaring (three n x n products for P^8, 6 n^3); each power takes
//   whichever gives the cheaper chain under CostWeights. Alone, a power is computed by squaring.
// - Product chains are parenthesised by the classic matrix-chain dynamic programme on flops
//   (A*B*C*D with mixed shapes), ties broken towards fewer bytes of intermediates.
// - Common subexpressions are shared (hash-consing on structure), so A^2 in A + A^2 + A^3, or
//   H' * H written twice, is computed once.
// Costs count each shared node once. Pure functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/balance/expr/expression.hpp"

namespace tessera::balance::expr {

struct Cost {
  double flops = 0.0;               // 2 m k n per product, m n per sum, difference or scale
  double intermediate_bytes = 0.0;  // 8 x rows x cols of every node computed (inputs excluded)
  double moved_bytes = 0.0;         // 8 (m k + k n + m n) per product: its operands out, its result back
  uint64_t products = 0;            // matrix products (GEMM calls on the cluster)
  bool operator==(const Cost&) const = default;
};
Cost cost(const Expr& e);

// What a flop and a moved byte cost, to compare rewritings by predicted time. Flops only by
// default; `tessera eval` uses the cluster's profiled speed and the coordinator's send capacity,
// since each product it runs sends its operands out and its result back.
struct CostWeights {
  double seconds_per_flop = 1.0;
  double seconds_per_moved_byte = 0.0;
  double seconds(const Cost& c) const { return c.flops * seconds_per_flop + c.moved_bytes * seconds_per_moved_byte; }
};

// base^exponent as products by repeated squaring: floor(log2 k) squarings and popcount(k) - 1
// more products, each square one node shared by the products that use it.
// REQUIRES: base square, exponent >= 1.
Expr power_by_squaring(const Expr& base, uint32_t exponent);

// Equal subtrees become one shared node.
Expr eliminate_common(const Expr& e);

// Every product chain parenthesised for the fewest flops; powers stay as they are.
Expr order_chains(const Expr& e);

// Powers replaced in context by chain factors or by squaring (see above); chains then ordered
// and common subexpressions shared. The result has no kPower node.
Expr rewrite(const Expr& e, const CostWeights& weights = {});

// Every power computed by repeated squaring, nothing else changed (what runs with --no-rewrite:
// the scheduled evaluation needs a tree of products, sums and transposes).
Expr powers_by_squaring(const Expr& e);

// Transposes moved down to the inputs ((A B)' = B' A', (A + B)' = A' + B', (s A)' = s A',
// A'' = A, I' = I), so that every transpose left reads an input: the coordinator transposes
// input tiles as it sends them and no worker ever transposes an intermediate. Shared subtrees
// stay shared. REQUIRES: no kPower node.
Expr transposes_to_inputs(const Expr& e);

// "before: u * P^8  (...flops...)\nafter: ..." for `tessera eval --explain`: both trees and
// their costs.
std::string explain(const Expr& before, const Expr& after);

}  // namespace tessera::balance::expr
