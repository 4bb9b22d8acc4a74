// How much memory this process may still allocate, so inputs whose size is announced (a --n flag,
// a .npy shape, a Matrix Market header) are refused with a sentence before an allocation that
// would end in std::bad_alloc or the OOM killer.
//
// The figure is Linux's MemAvailable (free memory plus what the kernel can reclaim), lowered to
// the room left under the process's cgroup v2 memory.max when one is set. It is an estimate that
// changes as other processes run; callers use it to refuse what cannot fit, not to promise that
// what fits will. Thread-safety: reentrant (reads /proc and /sys each call).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/status.hpp"

namespace tessera {

// Bytes this process can expect to allocate; 0 when nothing can be read (not Linux).
uint64_t available_memory_bytes();

// "298 GiB", "1.5 MiB", "512 B": binary units, three significant digits at most.
std::string format_bytes(uint64_t bytes);

// OK when `bytes` fit into available_memory_bytes() (or when that is unknown). Otherwise
// ResourceExhausted: "<what> needs <bytes>; this machine has <available> available<remedy>",
// e.g. what = "A 200000x200000", remedy = "; use a smaller --n".
Status check_fits_in_memory(uint64_t bytes, std::string_view what, std::string_view remedy = "");

// rows x cols x element_size, saturating at UINT64_MAX instead of wrapping.
uint64_t saturating_bytes(uint64_t rows, uint64_t cols, uint64_t element_size);

}  // namespace tessera
