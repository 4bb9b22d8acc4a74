#include "tessera/core/time.hpp"

#include <ctime>

namespace tessera {

std::string format_utc(std::chrono::system_clock::time_point when, UtcFormat format) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  const char* pattern = format == UtcFormat::kIso8601 ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%S";
  char text[32];
  const std::size_t length = std::strftime(text, sizeof text, pattern, &utc);
  return std::string(text, length);
}

std::string utc_now(UtcFormat format) { return format_utc(std::chrono::system_clock::now(), format); }

}  // namespace tessera
