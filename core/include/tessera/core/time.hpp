// Wall-clock timestamps in UTC, in the two formats Tessera writes (every timestamp a file or a
// report carries comes from here, so the formats are named once), durations on the monotonic
// clock, and this process's CPU clock.
//
// Functions returning values; thread-safe (gmtime_r, getrusage).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

enum class UtcFormat {
  kIso8601,   // "2026-11-21T10:00:00Z": machine-readable, sorts as text (saved profiles)
  kReadable,  // "2026-11-21 10:00:00": for people; the caller says "UTC" where it prints it
};

// `when` in UTC, to the second (truncated).
std::string format_utc(std::chrono::system_clock::time_point when, UtcFormat format);
// The current time in UTC.
std::string utc_now(UtcFormat format);
// Reads what format_utc(..., kIso8601) writes; nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> parse_utc_iso8601(std::string_view text);

// Seconds from `from` to `to` on the monotonic clock every deadline and duration uses.
inline double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// CPU seconds this process has used so far, user and system, over all its threads (the kernel's
// loopback work for its sockets lands here too); 0 if the kernel will not say.
double process_cpu_seconds();

}  // namespace tessera
