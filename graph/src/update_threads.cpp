// UpdateThreads (update_threads.hpp).
#include "update_threads.hpp"

#include <utility>

namespace tessera::graph::detail {

UpdateThreads::~UpdateThreads() {
  if (started_) {
    request_stop();
    join();
  }
}

void UpdateThreads::start(uint32_t count, const std::function<void(uint32_t)>& body) {
  stop_.store(false);
  live_.store(count);
  started_ = true;
  for (uint32_t i = 0; i < count; ++i) {
    threads_.emplace_back([this, i, body] {
      body(i);
      live_.fetch_sub(1);
    });
  }
}

void UpdateThreads::request_stop() {
  stop_.store(true);
  wake_sleepers_();
}

void UpdateThreads::join() {
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  started_ = false;
}

}  // namespace tessera::graph::detail
