#include "coordinator_slot.hpp"

#include <fmt/core.h>

namespace tessera::worker {

std::string seconds_text(std::chrono::milliseconds span) {
  return span.count() % 1000 == 0 ? fmt::format("{} s", span.count() / 1000)
                                  : fmt::format("{:.1f} s", static_cast<double>(span.count()) / 1000.0);
}

std::string busy_text(const CoordinatorSlot::Holder& holder, std::chrono::milliseconds idle_timeout) {
  const double idle_s = std::chrono::duration<double>(holder.idle).count();
  std::string text = fmt::format("worker busy with a session from {}, idle for {:.1f} s", holder.peer, idle_s);
  if (idle_timeout.count() > 0) {
    text += fmt::format(" (a session idle for {} yields to the next coordinator)", seconds_text(idle_timeout));
  }
  return text;
}

}  // namespace tessera::worker
