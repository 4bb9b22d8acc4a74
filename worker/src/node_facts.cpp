#include "tessera/worker/worker_server.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tessera/worker/gemm_service.hpp"
#include "tessera/worker/graph_probe.hpp"
#include "tessera/worker/graph_service.hpp"
#ifdef TESSERA_FAULT_HOOKS
#include "tessera/worker/fault_hooks.hpp"
#endif

namespace tessera::worker {

NodeFacts read_node_facts() {
  NodeFacts facts;
  struct utsname names {};
  if (::uname(&names) == 0) {
    facts.arch = names.machine;
    facts.hostname = names.nodename;
  }
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  facts.cores = cpus < 1 ? 1u : static_cast<uint32_t>(cpus);
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    facts.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  return facts;
}

std::optional<uint32_t> read_load_milli() {
  double averages[1] = {0.0};
  if (::getloadavg(averages, 1) != 1 || !(averages[0] >= 0.0)) return std::nullopt;
  return static_cast<uint32_t>(std::min(std::lround(averages[0] * 1000.0), long{UINT32_MAX}));
}

std::string worker_version() { return TESSERA_VERSION; }

std::vector<Service> default_services() {
  std::vector<Service> services;
  services.push_back(gemm_service());
  services.push_back(graph_service());
  services.push_back(graph_probe_service());
#ifdef TESSERA_FAULT_HOOKS
  // The test twin can play a worker that hosts fewer services (one without graph, say).
  if (const std::vector<std::string>& only = fault_hooks().services; !only.empty()) {
    std::erase_if(services, [&](const Service& service) {
      return std::find(only.begin(), only.end(), service.name) == only.end();
    });
  }
#endif
  return services;
}

}  // namespace tessera::worker
