// The GEMM service's PROBE (gemm_service.hpp says what it measures and how it is bounded): an
// echo of bytes for the link's latency, or a square product timed on the compute pool in blocks
// that stop when the coordinator goes. Internal to the worker library; connection thread only.
#pragma once

#include "tessera/transport/protocol.hpp"
#include "tessera/worker/service.hpp"

namespace tessera::worker {

// Reads the PROBE whose header is `header` and answers it with PROBE_RESULT, or fails the session
// naming the bound it breaks.
HandlerStep handle_probe(ServiceContext& context, const transport::FrameHeader& header);

}  // namespace tessera::worker
