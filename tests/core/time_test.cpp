#include "tessera/core/time.hpp"

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace tessera {
namespace {

using namespace std::chrono_literals;

std::chrono::system_clock::time_point sample_time() {
  return std::chrono::sys_days{std::chrono::year{2026} / 11 / 21} + 10h + 5min + 7s + 999ms;
}

TEST(FormatUtc, WritesEachNamedFormatTruncatedToTheSecond) {
  EXPECT_EQ(format_utc(sample_time(), UtcFormat::kIso8601), "2026-11-21T10:05:07Z");
  EXPECT_EQ(format_utc(sample_time(), UtcFormat::kReadable), "2026-11-21 10:05:07");
  EXPECT_EQ(format_utc(std::chrono::system_clock::time_point{}, UtcFormat::kIso8601), "1970-01-01T00:00:00Z");
}

TEST(FormatUtc, Iso8601SortsAsText) {
  const std::string earlier = format_utc(sample_time(), UtcFormat::kIso8601);
  const std::string later = format_utc(sample_time() + 24h * 40, UtcFormat::kIso8601);
  EXPECT_LT(earlier, later);
}

TEST(UtcNow, IsTheCurrentTimeInTheRequestedFormat) {
  const auto before = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  const std::string now = utc_now(UtcFormat::kIso8601);
  const auto after = std::chrono::system_clock::now();
  EXPECT_TRUE(std::regex_match(now, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << now;
  EXPECT_GE(now, format_utc(before, UtcFormat::kIso8601));
  EXPECT_LE(now, format_utc(after, UtcFormat::kIso8601));
  EXPECT_TRUE(std::regex_match(utc_now(UtcFormat::kReadable), std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")));
}

TEST(ProcessCpuSeconds, GrowsWithWorkDoneAndNotWithSleep) {
  const double start = process_cpu_seconds();
  EXPECT_GE(start, 0.0);
  volatile double sink = 0.0;
  const double busy_until = start + 0.05;
  while (process_cpu_seconds() < busy_until) sink = sink + 1.0;
  const double after_work = process_cpu_seconds();
  EXPECT_GE(after_work - start, 0.05);
  std::this_thread::sleep_for(200ms);
  EXPECT_LT(process_cpu_seconds() - after_work, 0.1) << "sleeping took CPU";
}

}  // namespace
}  // namespace tessera
