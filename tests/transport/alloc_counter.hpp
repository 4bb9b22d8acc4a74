// Counts what the current thread asks of the global operator new, so tests can prove that a
// decoder refused a lying frame before allocating what it claimed. The test binary replaces
// operator new (alloc_counter.cpp); other threads are not counted.
#pragma once

#include <cstdint>
#include <utility>

#include "tessera/core/status.hpp"

namespace tessera::transport::testing {

// What a decoder may allocate for a frame it refuses or reads in place: far below any claim a
// test makes, far above the bookkeeping a decode needs.
inline constexpr uint64_t kSmallAllocation = 64 * 1024;

class AllocationCounter {
 public:
  AllocationCounter();
  ~AllocationCounter();
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

  uint64_t bytes() const;        // bytes requested on this thread since construction
  uint64_t allocations() const;  // calls since construction

 private:
  bool was_active_;
  uint64_t bytes_at_start_;
  uint64_t allocations_at_start_;
};

// What read() returned (a Status), and the bytes it asked of operator new on this thread meanwhile.
template <typename Read>
std::pair<Status, uint64_t> counted(Read&& read) {
  AllocationCounter counter;
  Status status = read();
  return {std::move(status), counter.bytes()};
}

}  // namespace tessera::transport::testing
