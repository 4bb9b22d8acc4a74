// The dynamic (pull) driver: C's rows are cut into tiles that nodes take as they finish earlier
// ones, so a node that is slow, or slows down mid-run, simply takes fewer; a node that dies has
// its unfinished tiles handed to the others, and the product is still exact.
//
// Each node receives B's panels once (encoded once for all nodes, sent from B's memory), lazily,
// as its first tile needs them, and keeps them; a tile then costs only its rows of A. A tile's
// jobs add A_tile[:, panel] x B_panel into the tile's C block in place, panel by panel, within the
// plan's credit window; the last returns the block, which is read straight into C. The first
// and last tiles are a quarter of the plan's tile size, so every node starts at once and the tail
// is short. When no tile is left, an idle node takes a copy of a tile still running elsewhere
// (one copy per tile); the first result wins. When the last tile is in, nodes stop at the next
// panel boundary, drain their credits and release their tiles, so sessions stay usable.
// The caller owns the cluster and the matrices; not reentrant on one cluster.
#pragma once

#include "tessera/balance/cluster_connection.hpp"
#include "tessera/balance/matrix.hpp"
#include "tessera/balance/multiply.hpp"
#include "tessera/balance/plan.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance {

// REQUIRES: plan.policy == kDynamic, plan.shares match cluster.links() in order and name; a is
// m x k, b is k x n. Fails only when every node has failed (the message names each) or on bad
// input. run.lost_nodes / reissued_tiles / speculative_* say what happened.
Result<MultiplyRun> run_dynamic_multiply(ClusterConnection& cluster, const Plan& plan, const Matrix& a,
                                         const Matrix& b, Matrix& c, const MultiplyHooks& hooks = {});

}  // namespace tessera::balance
