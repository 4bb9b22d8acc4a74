// Faults that used to hang or lock out, against real tessera-worker processes on loopback: a
// worker stopped (SIGSTOP) during the handshake or in the middle of a run, a worker out of file
// descriptors, and `tessera status` on a worker serving someone else. Every stopped process is
// continued by pid when the test ends, also when an assertion fails. Only upper bounds on time
// are asserted, with wide margins: these run on a loaded two-core machine.
#include "tessera/balance/session/session.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>

#include "process_fixture.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "reference_product.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/multiply/report.hpp"

namespace tessera::balance {
namespace {

using testing::ChildProcess;
using testing::TempDir;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using testing::kSecret;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Continues a process this test stopped, whatever happens to the test (by pid, never by name).
class ContinueOnExit {
 public:
  explicit ContinueOnExit(int pid) : pid_(pid) {}
  ~ContinueOnExit() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }
  ContinueOnExit(const ContinueOnExit&) = delete;
  ContinueOnExit& operator=(const ContinueOnExit&) = delete;

 private:
  int pid_;
};

std::size_t open_descriptors(int pid) {
  std::error_code error;
  std::size_t count = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++count;
  }
  return count;
}

class Deadlines : public ::testing::Test {
 protected:
  void start_workers(std::size_t count) {
    testing::LocalCluster started = testing::start_local_cluster("deadlines", kSecret, count, dir_);
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

TEST_F(Deadlines, HandshakeWithAStoppedWorkerFailsInBoundedTimeNamingTheNode) {
  start_workers(1);
  ContinueOnExit resume(workers_[0]->pid());
  ASSERT_EQ(::kill(workers_[0]->pid(), SIGSTOP), 0);
  // The stopped worker's kernel still completes the TCP handshake; only HELLO never comes.
  cluster::ConnectOptions options;
  options.timeout = milliseconds(1000);
  const auto start = Clock::now();
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_, options);
  ASSERT_FALSE(connection.is_ok());
  EXPECT_LT(seconds_since(start), 20.0);
  EXPECT_EQ(connection.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(connection.status().message().find("node 'a' (" + cluster_.nodes[0].endpoint() + ")"), std::string::npos)
      << connection.status().message();
  EXPECT_NE(connection.status().message().find("no frame from"), std::string::npos) << connection.status().message();
}

TEST_F(Deadlines, AWorkerStoppedWhileBeingProfiledFailsTheProfileNamingIt) {
  start_workers(2);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  const int stopped_pid = workers_[1]->pid();
  ContinueOnExit resume(stopped_pid);
  ASSERT_EQ(::kill(stopped_pid, SIGSTOP), 0);
  profile::ProfileOptions options;
  options.quick = true;
  options.silent_node_seconds = 1.0;
  const auto start = Clock::now();
  Result<profile::ClusterProfile> profile = profile::run_profile(*connection, cluster_, std::nullopt, options);
  ASSERT_FALSE(profile.is_ok());
  EXPECT_LT(seconds_since(start), 70.0) << "bounded by the silence limit, or the per-node budget at worst";
  EXPECT_NE(profile.status().message().find("node 'b'"), std::string::npos) << profile.status().message();
}

// The last stage of a profile sends to every node at once (the coordinator's send capacity). A
// node stopped then fills its socket and the write to it blocks, which no read bound catches: the
// stage's own deadline ends it, naming the node. Here every node's own figures are reused, so that
// stage is the only one that talks to the nodes.
TEST_F(Deadlines, AWorkerStoppedWhileTheCoordinatorsSendCapacityIsMeasuredFailsNamingIt) {
  start_workers(2);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  profile::ProfileOptions options;
  options.quick = true;
  options.silent_node_seconds = 1.0;
  Result<profile::ClusterProfile> first = profile::run_profile(*connection, cluster_, std::nullopt, options);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  profile::ClusterProfile previous = *first;
  previous.coordinator_send_bytes_per_s = 0.0;  // not measured: the next profile measures only that

  const int stopped_pid = workers_[1]->pid();
  ContinueOnExit resume(stopped_pid);
  ASSERT_EQ(::kill(stopped_pid, SIGSTOP), 0);
  const auto start = Clock::now();
  auto second = std::async(std::launch::async, [&] { return profile::run_profile(*connection, cluster_, previous, options); });
  if (second.wait_for(std::chrono::seconds(90)) != std::future_status::ready) {
    ::kill(stopped_pid, SIGCONT);  // lets the blocked write go on, so the call returns and the test ends
    FAIL() << "the send-capacity stage did not end within 90 s of a node being stopped";
  }
  Result<profile::ClusterProfile> profile = second.get();
  ASSERT_FALSE(profile.is_ok());
  EXPECT_LT(seconds_since(start), 60.0) << "bounded by the stage's deadline";
  EXPECT_NE(profile.status().message().find("node 'b'"), std::string::npos) << profile.status().message();
}

TEST_F(Deadlines, WorkerStoppedMidRunIsDroppedAsUnresponsiveAndTheProductStaysExact) {
  start_workers(3);
  Result<session::Session> session = session::Session::open(cluster_);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  const int stopped_pid = workers_[1]->pid();
  ContinueOnExit resume(stopped_pid);

  const linalg::Matrix a = linalg::random_matrix(240, 400, 21, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(400, 150, 22, linalg::FillKind::kIntegers);
  linalg::Matrix c(240, 150);
  session::MultiplyOptions options;
  options.policy = plan::ProportionalPolicy{{1.0, 1.0, 1.0}};
  options.panel_width = 32;  // 13 jobs per node: node b has more to do after its first credit
  options.panels_in_flight = 2;
  options.verify = multiply::VerifyMode::kExact;
  options.node_timeout_s = 2.0;
  session::RunControl control;
  std::atomic<bool> stopped{false};
  control.on_credit = [&](std::size_t node, uint64_t jobs_done) {
    if (node == 1 && jobs_done >= 1 && !stopped.exchange(true)) ::kill(stopped_pid, SIGSTOP);
  };
  const auto start = Clock::now();
  Result<session::MultiplyOutcome> outcome = session->multiply(a, b, c, options, control);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
  EXPECT_LT(seconds_since(start), 60.0);
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(c, reference_product(a, b));
  EXPECT_TRUE(outcome->report.verification.passed);

  const multiply::MultiplyRun& run = outcome->report.run;
  ASSERT_EQ(run.lost_nodes, std::vector<std::string>{"b"});
  ASSERT_EQ(run.lost_reasons.size(), 1u);
  EXPECT_NE(run.lost_reasons[0].find("node 'b' (" + cluster_.nodes[1].endpoint() + ") unresponsive: no frame for 2 s"),
            std::string::npos)
      << run.lost_reasons[0];
  EXPECT_NE(run.lost_reasons[0].find("in flight"), std::string::npos) << run.lost_reasons[0];
  // Its tile (13 jobs) never came back from it: the others delivered all of C, through the
  // reissue or through spare copies they had already taken, whichever came first.
  EXPECT_EQ(run.nodes[1].volume, 0u);
  EXPECT_EQ(run.nodes[0].volume + run.nodes[2].volume, uint64_t{240} * 150 * 400);
  EXPECT_NE(multiply::format_report_table(outcome->report).find("unresponsive"), std::string::npos);
  session->close();
}

TEST_F(Deadlines, WorkerOutOfDescriptorsServesAgainOnceConnectionsClose) {
  testing::write_file(dir_.file("secret"), kSecret);
  cluster_.name = "deadlines";
  cluster_.secret = kSecret;
  cluster::NodeSpec node;
  node.name = "a";
  node.host = "127.0.0.1";
  node.port = testing::free_loopback_port();
  node.threads = 1;
  cluster_.nodes.push_back(node);
  // About 10 descriptors are the worker's own (stdio, epoll, eventfd, timerfd, the listener, the
  // stop pipe); 20 leaves room for a handful of connections. Silent connections are only closed
  // by eviction or by us: the handshake timeout is long.
  ChildProcess worker({"/usr/bin/prlimit", "--nofile=20:20", "--", TESSERA_WORKER_BINARY, "--listen", node.endpoint(),
                       "--threads", "1", "--secret-file", dir_.file("secret"), "--handshake-timeout", "300"},
                      dir_.file("worker.log"));
  ASSERT_TRUE(testing::wait_until_listening(node));
  std::this_thread::sleep_for(milliseconds(300));
  const std::size_t baseline = open_descriptors(worker.pid());
  ASSERT_GT(baseline, 0u);

  {
    // Twelve connections from twelve addresses: no per-source eviction, fewer than the 16 slots,
    // more than the descriptors allow. The ones the worker cannot accept wait in its backlog.
    asio::io_context context;
    std::vector<asio::ip::tcp::socket> sockets;
    for (int i = 0; i < 12; ++i) {
      asio::ip::tcp::socket socket(context);
      asio::error_code ec;
      socket.open(asio::ip::tcp::v4(), ec);
      if (!ec) socket.bind({asio::ip::make_address("127.0.0." + std::to_string(10 + i)), 0}, ec);
      if (!ec) socket.connect({asio::ip::make_address(node.host), node.port}, ec);
      ASSERT_FALSE(ec) << ec.message();
      sockets.push_back(std::move(socket));
    }
    const auto start = Clock::now();
    while (testing::read_file(dir_.file("worker.log")).find("Too many open files") == std::string::npos &&
           seconds_since(start) < 20.0) {
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_NE(testing::read_file(dir_.file("worker.log")).find("Too many open files"), std::string::npos)
        << testing::read_file(dir_.file("worker.log"));
    // A real coordinator cannot get in now (it waits in the backlog; its handshake times out).
    Result<cluster::NodeLink> refused = cluster::connect_node(node, kSecret, milliseconds(500));
    EXPECT_FALSE(refused.is_ok());
  }  // every test connection closes

  // The worker frees the sockets of connections that ended and accepts again.
  const auto start = Clock::now();
  Result<cluster::NodeLink> link = cluster::connect_node(node, kSecret, milliseconds(2000));
  while (!link.is_ok() && seconds_since(start) < 30.0) {
    std::this_thread::sleep_for(milliseconds(200));
    link = cluster::connect_node(node, kSecret, milliseconds(2000));
  }
  ASSERT_TRUE(link.is_ok()) << link.status().to_string() << "\n" << testing::read_file(dir_.file("worker.log"));
  cluster::say_goodbye(*link);  // closes our end

  // No CLOSE-WAIT leak: back to the worker's own descriptors (one spare for a connection still
  // being reaped as we look).
  const auto settle = Clock::now();
  while (open_descriptors(worker.pid()) > baseline + 1 && seconds_since(settle) < 20.0) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_LE(open_descriptors(worker.pid()), baseline + 1);
}

TEST_F(Deadlines, StatusShowsABusyWorkerWithItsSessionPeerApartFromUnreachable) {
  start_workers(2);
  // Node a serves another coordinator; node b is down.
  Result<cluster::NodeLink> holder = cluster::connect_node(cluster_.nodes[0], kSecret, milliseconds(5000));
  ASSERT_TRUE(holder.is_ok()) << holder.status().to_string();
  workers_[1]->stop();
  emulation::LocalClusterOptions options;
  options.run_dir = dir_.file("run");
  const std::vector<emulation::NodeReachability> status = *emulation::cluster_status(cluster_, options);
  ASSERT_EQ(status.size(), 2u);
  EXPECT_FALSE(status[0].reachable);
  EXPECT_TRUE(status[0].busy);
  EXPECT_NE(status[0].detail.find("serving another coordinator: 127.0.0.1:"), std::string::npos) << status[0].detail;
  EXPECT_FALSE(status[1].reachable);
  EXPECT_FALSE(status[1].busy) << status[1].detail;
  cluster::say_goodbye(*holder);
}

// A listening socket that never accepts: the kernel completes the TCP handshake, then nothing
// ever arrives, so a client waits for the worker's HELLO until its deadline.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;
    }
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

TEST_F(Deadlines, StatusWaitsForSilentNodesTogetherAndTellsARefusalFromADownNode) {
  start_workers(1);
  // Five hosts that take a connection and then say nothing: checked one after the other they
  // would cost five deadlines; checked together, about one.
  std::vector<std::unique_ptr<SilentListener>> silent;
  cluster::ClusterSpec lab = cluster_;
  for (int i = 0; i < 5; ++i) {
    silent.push_back(std::make_unique<SilentListener>());
    ASSERT_NE(silent.back()->port(), 0);
    cluster::NodeSpec node = cluster_.nodes[0];
    node.name = "silent" + std::to_string(i);
    node.port = silent.back()->port();
    lab.nodes.push_back(node);
  }
  emulation::LocalClusterOptions options;
  options.run_dir = dir_.file("run");
  const auto begun = Clock::now();
  const std::vector<emulation::NodeReachability> status = *emulation::cluster_status(lab, options, milliseconds(1000));
  const double took = seconds_since(begun);
  ASSERT_EQ(status.size(), 6u);
  EXPECT_EQ(status[0].reach, emulation::Reach::kReachable) << status[0].detail;
  ASSERT_TRUE(status[0].hello.has_value());
  for (std::size_t i = 1; i < status.size(); ++i) {
    EXPECT_EQ(status[i].reach, emulation::Reach::kUnreachable) << status[i].name << ": " << status[i].detail;
    EXPECT_GE(status[i].seconds, 0.9) << status[i].name << " did not wait for its deadline";
  }
  EXPECT_LT(took, 3.5) << "five silent nodes of 1 s each took " << took << " s: checked one after another?";

  // The same worker with the wrong secret answers, so it is REFUSED, not down.
  cluster::ClusterSpec wrong = cluster_;
  wrong.secret = "not-the-secret";
  wrong.secret_file.clear();
  const std::vector<emulation::NodeReachability> refused = *emulation::cluster_status(wrong, options, milliseconds(2000));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].reach, emulation::Reach::kRefused) << refused[0].detail;
  EXPECT_EQ(emulation::reach_name(refused[0].reach), "REFUSED");
  workers_[0]->stop();
  const std::vector<emulation::NodeReachability> down = *emulation::cluster_status(cluster_, options, milliseconds(2000));
  EXPECT_EQ(down[0].reach, emulation::Reach::kUnreachable) << down[0].detail;
}

}  // namespace
}  // namespace tessera::balance
