// tessera-worker: parses flags and runs tessera::worker::WorkerServer until SIGINT/SIGTERM.
//
// Exit codes: 0 after a signal, 1 when the server cannot start (port in use, bad host),
// 2 for bad flags or an unusable secret.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "tessera/transport/auth.hpp"
#include "tessera/worker/worker_server.hpp"
#ifdef TESSERA_FAULT_HOOKS
#include "tessera/worker/fault_hooks.hpp"
#endif

namespace {

constexpr int kExitStartFailed = 1;
constexpr int kExitUsage = 2;
constexpr uint32_t kMaxThreads = 4096;

struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

// "0.0.0.0:7070", "node7:7070" or "[::1]:7070".
std::optional<Endpoint> parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
  Endpoint endpoint;
  endpoint.host = text.substr(0, colon);
  if (endpoint.host.front() == '[') {
    if (endpoint.host.size() < 3 || endpoint.host.back() != ']') return std::nullopt;
    endpoint.host = endpoint.host.substr(1, endpoint.host.size() - 2);
  }
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, endpoint.port);
  if (ec != std::errc() || end != last) return std::nullopt;
  return endpoint;
}

// Written by the signal handler (write(2) is async-signal-safe), read by the thread that stops
// the server.
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int signal_number) {
  const int saved_errno = errno;
  const char byte = static_cast<char>(signal_number);
  [[maybe_unused]] const ssize_t written = ::write(g_stop_pipe[1], &byte, 1);
  errno = saved_errno;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "tessera-worker: %s\nRun 'tessera-worker --help' for the flags.\n", message.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  namespace worker = tessera::worker;

  CLI::App app{"Tessera worker: serves GEMM jobs for one authenticated coordinator at a time."};
  app.set_version_flag("--version", "tessera-worker " + worker::worker_version());
  std::string listen;
  uint32_t threads = 0;
  std::string secret_file;
  std::string secret;
  uint64_t memory_cap_mb = 0;
  double idle_timeout_s = 10.0;
  double handshake_timeout_s = 5.0;
  std::string wire = "any";
  app.add_option("--listen", listen, "HOST:PORT to listen on, e.g. 0.0.0.0:7070 (port 0 picks a free one)")
      ->required();
  app.add_option("--threads", threads, "compute threads; 0 = all online CPUs")
      ->check(CLI::Range(0u, kMaxThreads))
      ->default_val(0);
  auto* secret_file_option =
      app.add_option("--secret-file", secret_file, "file holding the shared secret (trailing whitespace ignored)");
  auto* secret_option = app.add_option("--secret", secret, "the shared secret itself (visible in ps; prefer --secret-file)");
  secret_file_option->excludes(secret_option);
  app.add_option("--memory-cap-mb", memory_cap_mb, "tile memory cap in MiB; 0 = half of physical memory")
      ->default_val(0);
  app.add_option("--idle-timeout", idle_timeout_s,
                 "a session that has sent nothing for this many seconds while none of its work is in progress "
                 "yields the worker to the next coordinator that authenticates (BUSY replies say how long the "
                 "session has been idle); 0 = never yield")
      ->check(CLI::Range(0.0, 86400.0))
      ->default_val(10.0);
  app.add_option("--handshake-timeout", handshake_timeout_s,
                 "seconds a new connection has to authenticate before it is closed")
      ->check(CLI::Range(0.1, 3600.0))
      ->default_val(5.0);

  std::string store_dir;
  uint64_t store_bytes = 0;
  app.add_option("--store", store_dir,
                 "folder of the block store: resident blocks a coordinator asks to keep are written here and found "
                 "again by later sessions and after a restart (created if missing; off when not given)");
  app.add_option("--store-bytes", store_bytes,
                 "the block store's bound on disk, least recently used blocks evicted past it (e.g. 8GiB, 500MB; "
                 "default 8 GiB)")
      ->transform(CLI::AsSizeValue(false));

  app.add_option("--wire", wire,
                 "any: serve plain and encrypted (TLS 1.3) coordinators as each asks; encrypted: refuse plain ones")
      ->check(CLI::IsMember({"any", "encrypted"}))
      ->default_val("any");

#ifdef TESSERA_FAULT_HOOKS
  // Test twin only (tessera-worker-faulty): deterministic faults, see fault_hooks.hpp.
  worker::FaultHooks fault_hooks;
  app.add_option("--fault-die-after-result-bytes", fault_hooks.die_after_result_bytes,
                 "SIGKILL this process after this many data bytes of its first RESULT");
  app.add_option("--fault-stop-after-result-bytes", fault_hooks.stop_after_result_bytes,
                 "SIGSTOP this process after this many data bytes of its first RESULT (its CREDIT is sent)");
  app.add_flag("--fault-corrupt-result", fault_hooks.corrupt_first_result,
               "flip one data byte of the first RESULT (its CRC stays that of the true data)");
  app.add_option("--fault-close-after-stores", fault_hooks.close_after_stores,
                 "close the connection after this many STOREs have been received");
  app.add_option("--fault-delay-deltas-ms", fault_hooks.delay_deltas_ms,
                 "write each graph delta batch to its peer this many ms after the engine sent it");
  app.add_option("--fault-delay-credits-ms", fault_hooks.delay_credits_ms,
                 "write each GEMM job's CREDIT this many ms after the job finished (a slow worker)");
  app.add_option("--fault-stall-probe-ms", fault_hooks.stall_probe_ms,
                 "sleep this many ms inside the GEMM probe's first timed block (a node throttled at its start)");
  app.add_option("--fault-services", fault_hooks.services,
                 "host only these services, comma-separated (gemm, graph); e.g. gemm: no graph service")
      ->delimiter(',')
      ->check(CLI::IsMember({"gemm", "graph"}));
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  const auto endpoint = parse_endpoint(listen);
  if (!endpoint) return usage_error("--listen \"" + listen + "\" is not HOST:PORT (e.g. 0.0.0.0:7070)");

  worker::WorkerOptions options;
  options.listen_host = endpoint->host;
  options.port = endpoint->port;
  options.threads = threads;
  options.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(idle_timeout_s * 1000.0));
  options.handshake_timeout = std::chrono::milliseconds(static_cast<int64_t>(handshake_timeout_s * 1000.0));
  options.wire = wire == "encrypted" ? tessera::transport::WireMode::kEncrypted : tessera::transport::WireMode::kPlain;
  if (memory_cap_mb > (UINT64_MAX >> 20)) return usage_error("--memory-cap-mb is too large");
  options.tile_memory_cap = memory_cap_mb << 20;
  if (store_bytes != 0 && store_dir.empty()) return usage_error("--store-bytes needs --store DIR");
  options.store_dir = store_dir;
  options.store_bytes = store_bytes;
  if (secret_file_option->count() > 0) {
    // A FIFO, a device, a file others can read or change, or one another user owns is refused by
    // name with the fix (the coordinator's secret_file and the run directory get the same check).
    auto read = tessera::transport::read_secret_file(secret_file);
    if (!read.is_ok()) return usage_error(read.status().message());
    options.secret = std::move(read).value();
  } else if (secret_option->count() > 0) {
    if (secret.empty()) return usage_error("--secret is empty; the worker refuses to run without a secret");
    options.secret = secret;
  } else {
    return usage_error("a shared secret is required: pass --secret-file FILE (or --secret S)");
  }

  // A handler, not sigwait(): OpenBLAS starts its threads before main, with the signals unblocked,
  // so a blocked-signal scheme could still see SIGTERM kill the process on one of them.
  if (::pipe2(g_stop_pipe, O_CLOEXEC) != 0) {
    std::perror("tessera-worker: pipe");
    return kExitStartFailed;
  }
  struct sigaction stop_action {};
  stop_action.sa_handler = on_stop_signal;
  sigemptyset(&stop_action.sa_mask);
  stop_action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &stop_action, nullptr);
  sigaction(SIGTERM, &stop_action, nullptr);
  // A coordinator that disconnects mid-write must cost us a failed write, not the process.
  signal(SIGPIPE, SIG_IGN);

#ifdef TESSERA_FAULT_HOOKS
  worker::set_fault_hooks(fault_hooks);
#endif
  auto server = worker::WorkerServer::start(options);
  if (!server.is_ok()) {
    std::fprintf(stderr, "tessera-worker: %s\n", server.status().message().c_str());
    return server.status().code() == tessera::StatusCode::kInvalidArgument ? kExitUsage : kExitStartFailed;
  }
  const uint32_t effective_threads = threads != 0 ? threads : worker::read_node_facts().cores;
  const bool ipv6 = endpoint->host.find(':') != std::string::npos;
  std::printf("tessera-worker %s listening on %s%s%s:%u threads %u\n", worker::worker_version().c_str(),
              ipv6 ? "[" : "", endpoint->host.c_str(), ipv6 ? "]" : "", (*server)->port(), effective_threads);
  // `tessera up` and tests read this line through a pipe, where stdout is fully buffered.
  std::fflush(stdout);
  std::fprintf(stderr, "tessera-worker: services: %s; capabilities: %s\n", (*server)->services().describe().c_str(),
               tessera::transport::capability_names((*server)->capabilities()).c_str());

  std::thread signal_waiter([&] {
    char signal_number = 0;
    while (::read(g_stop_pipe[0], &signal_number, 1) < 0 && errno == EINTR) {
    }
    std::fprintf(stderr, "tessera-worker: %s received, stopping\n", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
    (*server)->stop();
  });
  (*server)->run();
  // run() returns only after stop(), which only the waiter calls.
  signal_waiter.join();
  return 0;
}
