// DeltaMailbox (delta_mailbox.hpp): a mutex and a swap.
#include "delta_mailbox.hpp"

namespace tessera::graph::detail {

void DeltaMailbox::push(std::vector<uint32_t>&& slots, std::vector<double>&& deltas, bool remote, double residual) {
  {
    std::lock_guard lock(mutex_);
    if (remote) remote_residual_ += residual;
    if (slots_.empty()) {
      slots_ = std::move(slots);
      deltas_ = std::move(deltas);
    } else {
      slots_.insert(slots_.end(), slots.begin(), slots.end());
      deltas_.insert(deltas_.end(), deltas.begin(), deltas.end());
    }
    ++pushes_;
  }
  wake_.notify_one();
}

DeltaMailbox::Taken DeltaMailbox::take(std::vector<uint32_t>& slots, std::vector<double>& deltas) {
  Taken taken;
  slots.clear();
  deltas.clear();
  std::lock_guard lock(mutex_);
  std::swap(slots, slots_);
  std::swap(deltas, deltas_);
  taken.pushes = std::exchange(pushes_, 0);
  taken.remote_residual = std::exchange(remote_residual_, 0.0);
  return taken;
}

void DeltaMailbox::wake_all() {
  std::lock_guard lock(mutex_);
  wake_.notify_all();
}

}  // namespace tessera::graph::detail
