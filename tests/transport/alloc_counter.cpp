#include "alloc_counter.hpp"

#include <cstdlib>
#include <new>

namespace {

// Plain thread_local PODs: reading them inside operator new must not allocate.
thread_local bool t_counting = false;
thread_local uint64_t t_bytes = 0;
thread_local uint64_t t_allocations = 0;

}  // namespace

namespace tessera::transport::testing {

AllocationCounter::AllocationCounter()
    : was_active_(t_counting), bytes_at_start_(t_bytes), allocations_at_start_(t_allocations) {
  t_counting = true;
}

AllocationCounter::~AllocationCounter() { t_counting = was_active_; }

uint64_t AllocationCounter::bytes() const { return t_bytes - bytes_at_start_; }
uint64_t AllocationCounter::allocations() const { return t_allocations - allocations_at_start_; }

}  // namespace tessera::transport::testing

// The array and nothrow forms of the standard library forward to these two.
void* operator new(std::size_t size) {
  if (t_counting) {
    t_bytes += size;
    ++t_allocations;
  }
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}

void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
