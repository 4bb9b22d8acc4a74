// The GEMM service: tiled matrix multiplication, the worker's first service, and the scaled
// sums of stored tiles that matrix expressions need (capabilities transport::kCapabilityGemm,
// transport::kCapabilityExpression and transport::kCapabilityTransposedJobs).
//
// STORE puts a tile in the session's memory-capped tile store (the data goes straight from the
// socket into tile memory); JOB queues C += A*B (op GEMM_ACCUMULATE) or C += s*A with the scalar
// s read from a stored tile (op ADD_SCALED) on sub-rectangles of stored tiles on the compute pool,
// reading A^T (and, for a product, B^T) straight from the stored tile when the job's transpose
// flags ask (jobs of both ops run in arrival order, each split over the pool's threads by rows of
// C, so accumulation is in place and needs no locks, and a job reading a C sees the earlier jobs'
// sums); each finished job returns a CREDIT, and kJobSendResult returns the output tile as RESULT
// straight from tile memory. RELEASE drops tiles.
// PROBE measures GEMM speed on the pool, or echoes bytes back (link latency). STATS_REQUEST
// returns the session's figures so far (see transport::Stats).
// The service keeps no state of its own: everything lives in the session's SessionContext, and
// its handlers follow the threading rules of service.hpp.
#pragma once

#include "tessera/worker/service.hpp"

namespace tessera::worker {

Service gemm_service();

}  // namespace tessera::worker
