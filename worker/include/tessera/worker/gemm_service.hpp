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
// returns the session's figures so far (see gemm::Stats).
// A GEMM probe is bounded by what the worker can do: before anything is allocated, one
// repetition (2 size^3 flops) must fit in kProbeRepetitionSeconds at a rate no core reaches
// (gemm_probe_size_bound); after the warm-up, at the rate the worker measured, it must fit in the
// longest a probe may last (gemm::Limits::max_probe_seconds), so a slow or crowded node still
// measures the sizes a profile asks for. Either refusal is ERROR(BAD_FRAME) naming the size and
// the bound. The product runs in blocks of about
// 20 ms, and between blocks the probe looks for its coordinator having gone (or the worker
// stopping), so it stops within ~50 ms plus a block and frees its matrices, which are returned
// to the system rather than kept for reuse.
// The service keeps no state of its own: everything lives in the session's ServiceContext, and
// its handlers follow the threading rules of service.hpp.
#pragma once

#include <cstdint>

#include "tessera/worker/service.hpp"
#include "tessera/gemm/wire_io.hpp"

namespace tessera::worker {

Service gemm_service();

// The longest one GEMM probe repetition may take. The coordinator's probes (sizes 128 to 2048,
// the reference 1024) take well under a second on any node it profiles; a probe must never hold
// the session for tens of seconds (one repetition of an 8192 is 1.1e12 flops).
inline constexpr double kProbeRepetitionSeconds = 5.0;
// DGEMM flops per second no single core reaches (above what the fastest cores, AVX-512 ones
// included, sustain with OpenBLAS), so the size bound refuses only probes no worker of that
// thread count could do.
inline constexpr double kProbeFastestThreadFlops = 100e9;

// The largest GEMM probe size a worker with `threads` compute threads takes: the largest n with
// 2 n^3 <= threads * kProbeFastestThreadFlops * kProbeRepetitionSeconds, at most `protocol_max`
// (transport::Limits::max_probe_size). 6299 for one thread, 7937 for two.
uint32_t gemm_probe_size_bound(uint32_t threads, uint32_t protocol_max);

}  // namespace tessera::worker
