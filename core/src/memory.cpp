#include "tessera/core/memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace tessera {

namespace {

uint64_t meminfo_available() {
  std::ifstream file("/proc/meminfo");
  std::string key;
  uint64_t value_kib = 0;
  std::string unit;
  while (file >> key >> value_kib) {
    std::getline(file, unit);
    if (key == "MemAvailable:") return value_kib * 1024;
  }
  // Kernels before 3.14 lack MemAvailable; free physical pages are a lower estimate.
  const long pages = ::sysconf(_SC_AVPHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) : 0;
}

// Room under this process's cgroup v2 memory.max; UINT64_MAX when there is no limit to respect.
uint64_t cgroup_room() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return std::numeric_limits<uint64_t>::max();
  const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
  std::ifstream max_file(dir + "/memory.max");
  std::string max_text;
  if (!(max_file >> max_text) || max_text == "max") return std::numeric_limits<uint64_t>::max();
  uint64_t limit = 0, current = 0;
  if (std::sscanf(max_text.c_str(), "%" SCNu64, &limit) != 1) return std::numeric_limits<uint64_t>::max();
  std::ifstream current_file(dir + "/memory.current");
  if (!(current_file >> current)) return limit;
  return limit > current ? limit - current : 0;
}

}  // namespace

uint64_t available_memory_bytes() { return std::min(meminfo_available(), cgroup_room()); }

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value >= 100.0 || value == std::floor(value)) {
    std::snprintf(text, sizeof text, "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.*f %s", value >= 10.0 ? 1 : 2, value, kUnits[unit]);
  }
  return text;
}

uint64_t saturating_bytes(uint64_t rows, uint64_t cols, uint64_t element_size) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  if (rows != 0 && cols > kMax / rows) return kMax;
  const uint64_t elements = rows * cols;
  if (element_size != 0 && elements > kMax / element_size) return kMax;
  return elements * element_size;
}

Status check_fits_in_memory(uint64_t bytes, std::string_view what, std::string_view remedy) {
  const uint64_t available = available_memory_bytes();
  if (available == 0 || bytes <= available) return Status::ok();
  std::ostringstream message;
  message << what << " needs " << format_bytes(bytes) << "; this machine has " << format_bytes(available)
          << " available" << remedy;
  return resource_exhausted(message.str());
}

}  // namespace tessera
