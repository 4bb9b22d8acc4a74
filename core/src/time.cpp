#include "tessera/core/time.hpp"

#include <sys/resource.h>

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

std::optional<std::chrono::system_clock::time_point> parse_utc_iso8601(std::string_view text) {
  if (text.size() != 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text[19] != 'Z') {
    return std::nullopt;
  }
  const auto number = [&](std::size_t at, std::size_t digits, int& out) {
    out = 0;
    for (std::size_t i = at; i < at + digits; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      out = out * 10 + (text[i] - '0');
    }
    return true;
  };
  std::tm utc{};
  int year = 0, month = 0;
  if (!(number(0, 4, year) && number(5, 2, month) && number(8, 2, utc.tm_mday) && number(11, 2, utc.tm_hour) &&
        number(14, 2, utc.tm_min) && number(17, 2, utc.tm_sec)) ||
      month < 1 || month > 12 || utc.tm_mday < 1 || utc.tm_mday > 31 || utc.tm_hour > 23 || utc.tm_min > 59 ||
      utc.tm_sec > 60) {
    return std::nullopt;
  }
  utc.tm_year = year - 1900;
  utc.tm_mon = month - 1;
  return std::chrono::system_clock::from_time_t(timegm(&utc));
}

double process_cpu_seconds() {
  struct rusage usage {};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0.0;
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace tessera
