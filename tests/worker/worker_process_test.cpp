// Runs the real tessera-worker binary: what `tessera up` and systemd do.
#include "tessera/worker/worker_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/gemm/wire_io.hpp"
#include "worker_test_client.hpp"

#ifndef TESSERA_WORKER_BINARY
#error "TESSERA_WORKER_BINARY must name the built tessera-worker"
#endif

namespace tessera::worker {
namespace {

namespace tp = tessera::transport;
using namespace std::chrono_literals;
using testing::connect_from;
using testing::Dense;
using testing::gemm_job;
using testing::read_expect;
using testing::store_tile;
using testing::Watchdog;

constexpr char kSecret[] = "process test secret";

// A child process with its stdout (and optionally stderr) on pipes. The destructor always
// terminates and reaps it, so a failing test never leaves a worker behind.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& args, bool capture_stderr) {
    int out[2] = {-1, -1};
    int err[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    if (capture_stderr && ::pipe2(err, O_CLOEXEC) != 0) return;
    // Everything the child needs is built before fork: only async-signal-safe calls follow it.
    std::vector<char*> argv;
    std::string binary = TESSERA_WORKER_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> owned = args;
    for (auto& arg : owned) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      if (capture_stderr) ::dup2(err[1], STDERR_FILENO);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_fd_ = out[0];
    if (capture_stderr) {
      ::close(err[1]);
      stderr_fd_ = err[0];
    }
  }

  ~ChildProcess() {
    terminate();
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    if (stderr_fd_ >= 0) ::close(stderr_fd_);
  }

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }

  // The first stdout line, or nullopt after `timeout` or EOF.
  std::optional<std::string> read_stdout_line(std::chrono::milliseconds timeout) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd fd{stdout_fd_, POLLIN, 0};
      if (::poll(&fd, 1, 100) <= 0) continue;
      char c = 0;
      if (::read(stdout_fd_, &c, 1) != 1) return std::nullopt;
      if (c == '\n') return line;
      line += c;
    }
    return std::nullopt;
  }

  std::string read_all_stderr() {
    std::string text;
    char buffer[4096];
    ssize_t n = 0;
    while (stderr_fd_ >= 0 && (n = ::read(stderr_fd_, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
    return text;
  }

  bool alive() {
    if (!started() || reaped_) return false;
    int status = 0;
    const pid_t result = ::waitpid(pid_, &status, WNOHANG);
    if (result == 0) return true;
    reaped_ = true;
    status_ = status;
    return false;
  }

  // The wait status once the child has exited, or nullopt after `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (alive()) {
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(20ms);
    }
    if (!reaped_) return std::nullopt;
    return status_;
  }

  // SIGTERM, then SIGKILL if it does not go within 5 s; always reaps.
  void terminate() {
    if (!started() || reaped_) return;
    ::kill(pid_, SIGTERM);
    if (wait_exit(5s)) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    status_ = status;
  }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// Runs the binary to completion and returns its exit code (-1 on signal or timeout).
int run_to_exit(const std::vector<std::string>& args, std::string* stderr_text = nullptr,
                std::string* stdout_line = nullptr) {
  ChildProcess child(args, /*capture_stderr=*/true);
  if (!child.started()) return -1;
  if (stdout_line != nullptr) *stdout_line = child.read_stdout_line(10s).value_or("");
  const auto status = child.wait_exit(20s);
  if (stderr_text != nullptr) *stderr_text = child.read_all_stderr();
  if (!status || !WIFEXITED(*status)) return -1;
  return WEXITSTATUS(*status);
}

class WorkerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Port 0: the worker binds a free loopback port and prints it on its first line.
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--threads", "2", "--secret", kSecret},
        /*capture_stderr=*/false);
    ASSERT_TRUE(process_->started());
    const auto line = process_->read_stdout_line(20s);
    ASSERT_TRUE(line.has_value()) << "tessera-worker printed no start line";
    const std::string marker = "listening on 127.0.0.1:";
    const auto at = line->find(marker);
    ASSERT_NE(at, std::string::npos) << *line;
    EXPECT_EQ(line->rfind("tessera-worker " + worker_version(), 0), 0u) << *line;
    EXPECT_NE(line->find(" threads 2"), std::string::npos) << *line;
    port_ = static_cast<uint16_t>(std::stoi(line->substr(at + marker.size())));
    ASSERT_NE(port_, 0);
  }

  // The ChildProcess destructor terminates and reaps the worker even when the test failed.
  void TearDown() override { process_.reset(); }

  std::unique_ptr<tp::FrameConnection> connect() {
    auto connection = tp::FrameConnection::connect("127.0.0.1", port_, 5s);
    EXPECT_TRUE(connection.is_ok()) << connection.status().to_string();
    return connection.is_ok() ? std::move(connection).value() : nullptr;
  }

  // After hostile input: the worker answered ERROR or simply closed, and it is still running.
  void expect_rejected_and_alive(tp::FrameConnection& connection) {
    Watchdog watchdog(connection, 20s);
    auto reply = connection.read_frame();
    if (reply.is_ok()) {
      EXPECT_EQ(reply->header.type, static_cast<uint16_t>(tp::MessageType::kError))
          << tp::message_type_name(reply->header.type);
      EXPECT_FALSE(connection.read_frame().is_ok()) << "the worker must close after ERROR";
    }
    EXPECT_TRUE(process_->alive()) << "tessera-worker died on bad input";
  }

  std::unique_ptr<ChildProcess> process_;
  uint16_t port_ = 0;
};

TEST_F(WorkerProcessTest, GarbageBytesGetAnErrorAndTheWorkerKeepsRunning) {
  std::mt19937 random(12345);
  std::vector<std::byte> garbage(4096);
  for (auto& b : garbage) b = static_cast<std::byte>(random() & 0xFF);
  {
    auto connection = connect();
    ASSERT_NE(connection, nullptr);
    testing::AnyFrame hello;
    ASSERT_TRUE(read_expect<tp::Hello>(*connection, hello));
    const asio::const_buffer part = asio::buffer(garbage.data(), garbage.size());
    (void)connection->write_buffers({&part, 1});
    expect_rejected_and_alive(*connection);
  }
  {
    // A well-formed header that claims a 1 TiB payload before authenticating.
    auto connection = connect();
    ASSERT_NE(connection, nullptr);
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kStore);
    header.payload_length = 1ull << 40;
    const auto bytes = tp::encode_header(header);
    const asio::const_buffer part = asio::buffer(bytes);
    (void)connection->write_buffers({&part, 1});
    testing::AnyFrame hello;
    ASSERT_TRUE(read_expect<tp::Hello>(*connection, hello));
    expect_rejected_and_alive(*connection);
  }
  {
    // Half a header, then hang up.
    auto connection = connect();
    ASSERT_NE(connection, nullptr);
    const asio::const_buffer part = asio::buffer(garbage.data(), 10);
    (void)connection->write_buffers({&part, 1});
  }
  auto session = connect();
  ASSERT_NE(session, nullptr);
  Watchdog watchdog(*session, 20s);
  EXPECT_TRUE(tp::client_handshake(*session, kSecret).is_ok());
  EXPECT_TRUE(process_->alive());
}

TEST_F(WorkerProcessTest, WrongSecretIsRefusedAndTheWorkerKeepsRunning) {
  auto connection = connect();
  ASSERT_NE(connection, nullptr);
  {
    Watchdog watchdog(*connection, 20s);
    auto handshake = tp::client_handshake(*connection, "wrong secret");
    ASSERT_FALSE(handshake.is_ok());
    EXPECT_EQ(handshake.status().code(), StatusCode::kAuthFailed) << handshake.status().to_string();
  }
  EXPECT_TRUE(process_->alive());
  auto session = connect();
  ASSERT_NE(session, nullptr);
  Watchdog watchdog(*session, 20s);
  EXPECT_TRUE(tp::client_handshake(*session, kSecret).is_ok());
}

TEST_F(WorkerProcessTest, CorrectSessionMultipliesExactly) {
  auto session = connect();
  ASSERT_NE(session, nullptr);
  Watchdog watchdog(*session, 30s);
  auto hello = tp::client_handshake(*session, kSecret);
  ASSERT_TRUE(hello.is_ok()) << hello.status().to_string();
  EXPECT_EQ(hello->threads, 2u);
  const Dense a = Dense::integers(9, 6, 5);
  const Dense b = Dense::integers(6, 7, 1);
  const Dense expected = testing::multiply(a, b);
  ASSERT_TRUE(store_tile(*session, 1, a).is_ok());
  ASSERT_TRUE(store_tile(*session, 2, b).is_ok());
  auto job = gemm_job(42, 1, 2, 3, 9, 7, 6, gemm::kJobCreateOutput | gemm::kJobReleaseA | gemm::kJobSendResult);
  job.c_rows = 9;
  job.c_cols = 7;
  ASSERT_TRUE(gemm::write_message(*session, job).is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 42u);
  ASSERT_TRUE(read_expect<gemm::ResultTile>(*session, frame));
  const auto& result = std::get<gemm::ResultTile>(frame.message);
  ASSERT_EQ(result.data.size(), expected.values.size());
  for (std::size_t i = 0; i < expected.values.size(); ++i) EXPECT_EQ(result.data[i], expected.values[i]) << i;
  ASSERT_TRUE(session->write_message(tp::Bye{}).is_ok());
  ASSERT_TRUE(read_expect<tp::Bye>(*session, frame));
}

TEST_F(WorkerProcessTest, SigtermExitsZero) {
  auto session = connect();  // an open session must not keep the worker from stopping
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(::kill(process_->pid(), SIGTERM), 0);
  const auto status = process_->wait_exit(10s);
  ASSERT_TRUE(status.has_value()) << "tessera-worker did not exit within 10 s of SIGTERM";
  ASSERT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 0);
}

TEST(WorkerCli, VersionPrintsTheVersion) {
  std::string line;
  EXPECT_EQ(run_to_exit({"--version"}, nullptr, &line), 0);
  EXPECT_NE(line.find(worker_version()), std::string::npos) << line;
}

TEST(WorkerCli, BadFlagsExitTwo) {
  std::string message;
  EXPECT_EQ(run_to_exit({}, &message), 2);
  EXPECT_NE(message.find("--listen"), std::string::npos) << message;
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0", "--threads", "lots", "--secret", "s"}, &message), 2);
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1", "--secret", "s"}, &message), 2);
  EXPECT_NE(message.find("HOST:PORT"), std::string::npos) << message;
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:99999", "--secret", "s"}, &message), 2);
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0", "--secret", "s", "--secret-file", "/x"}, &message), 2);
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0", "--bogus"}, &message), 2);
}

TEST(WorkerCli, MissingOrEmptySecretIsRefused) {
  std::string message;
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0"}, &message), 2);
  EXPECT_NE(message.find("secret"), std::string::npos) << message;
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0", "--secret", ""}, &message), 2);
  EXPECT_NE(message.find("secret"), std::string::npos) << message;

  const std::string empty_file = ::testing::TempDir() + "tessera_empty_secret";
  std::ofstream(empty_file) << "  \n";
  ::chmod(empty_file.c_str(), 0600);
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0", "--secret-file", empty_file}, &message), 2);
  EXPECT_NE(message.find(empty_file), std::string::npos) << message;
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0", "--secret-file", empty_file + ".missing"}, &message), 2);
  EXPECT_NE(message.find(".missing"), std::string::npos) << message;
  std::remove(empty_file.c_str());
}

TEST(WorkerCli, ASecretFileOthersCanReadIsRefusedWithTheChmod) {
  const std::string secret_file = ::testing::TempDir() + "tessera_open_secret";
  std::ofstream(secret_file) << kSecret << "\n";
  ::chmod(secret_file.c_str(), 0640);
  std::string message;
  EXPECT_EQ(run_to_exit({"--listen", "127.0.0.1:0", "--secret-file", secret_file}, &message), 2);
  EXPECT_NE(message.find("secret file '" + secret_file + "' has mode 0640"), std::string::npos) << message;
  EXPECT_NE(message.find("chmod 600 " + secret_file), std::string::npos) << message;
  std::remove(secret_file.c_str());
}

TEST(WorkerCli, PortInUseExitsOneNamingTheEndpoint) {
  asio::io_context io;
  asio::ip::tcp::acceptor taken(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::string endpoint = "127.0.0.1:" + std::to_string(taken.local_endpoint().port());
  std::string message;
  EXPECT_EQ(run_to_exit({"--listen", endpoint, "--secret", "s"}, &message), 1);
  EXPECT_NE(message.find(endpoint), std::string::npos) << message;
}


// Wrong MACs from one address are slowed down (3 free, then every answer from it held 50 ms
// doubling to 3.2 s before its verdict), each still answered with ERROR and a close; the right
// secret from the same address gets in after one hold, and a coordinator on another address gets
// in at once. Only lower bounds on time are asserted; "at once" is an ordering: the other
// address is through while an answer from the throttled one is still held.
TEST_F(WorkerProcessTest, WrongMacsAreThrottledPerAddressWithoutKeepingAnyoneOut) {
  asio::io_context context;
  const auto handshake_from = [&](const char* address, const char* secret) {
    auto connection = connect_from(context, address, port_);
    if (connection == nullptr) return Status(network_error("no connection"));
    Watchdog watchdog(*connection, 30s);
    return tp::client_handshake(*connection, secret, 20s).status();
  };
  for (int attempt = 1; attempt <= 4; ++attempt) {
    const Status refused = handshake_from("127.0.0.1", "a wrong guess");
    ASSERT_EQ(refused.code(), StatusCode::kAuthFailed) << attempt << ": " << refused.to_string();
  }
  // Attempts 5..10 are held 50 + 100 + 200 + 400 + 800 + 1600 ms before their verdict.
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 5; attempt <= 10; ++attempt) {
    const Status refused = handshake_from("127.0.0.1", "a wrong guess");
    ASSERT_EQ(refused.code(), StatusCode::kAuthFailed) << attempt << ": " << refused.to_string();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 3000ms) << "six throttled guesses were not slowed";

  // The right secret from the throttled address: held like a guess (3.2 s), then let in.
  const auto coordinator_start = std::chrono::steady_clock::now();
  const Status same_address = handshake_from("127.0.0.1", kSecret);
  EXPECT_TRUE(same_address.is_ok()) << same_address.to_string();
  EXPECT_GE(std::chrono::steady_clock::now() - coordinator_start, 3000ms) << "a right answer was not held like a guess";

  // A guess whose answer is being held; meanwhile another address gets in at once. The session
  // just closed may still be winding down on the worker, which says BUSY until it has: retried.
  std::unique_ptr<tp::FrameConnection> held;
  std::optional<tp::Hello> challenge;
  for (const auto deadline = std::chrono::steady_clock::now() + 20s; !challenge;) {
    held = connect_from(context, "127.0.0.1", port_);
    ASSERT_NE(held, nullptr);
    Watchdog watchdog(*held, 30s);
    Result<tp::IncomingFrame> hello = held->read_frame();
    ASSERT_TRUE(hello.is_ok()) << hello.status().to_string();
    if (const auto* greeting = std::get_if<tp::Hello>(&hello->message)) {
      challenge = *greeting;
      break;
    }
    const auto* refusal = std::get_if<tp::Error>(&hello->message);
    ASSERT_TRUE(refusal != nullptr && refusal->code == tp::ErrorCode::kBusy) << "neither HELLO nor BUSY";
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the worker stayed busy after the session closed";
    std::this_thread::sleep_for(50ms);
  }
  {
    Watchdog watchdog(*held, 30s);
    tp::Auth auth;
    auth.challenge = tp::random_challenge();
    auth.mac = tp::coordinator_mac("a wrong guess", challenge->challenge, auth.challenge);
    ASSERT_TRUE(held->write_message(auth).is_ok());
    // The worker says it holds the answer, and for how long, before any verdict.
    Result<tp::FrameHeader> notice = held->read_header();
    ASSERT_TRUE(notice.is_ok()) << notice.status().to_string();
    ASSERT_EQ(notice->type, static_cast<uint16_t>(tp::MessageType::kHeld));
    std::array<std::byte, tp::kHeldPayloadBytes> payload{};
    ASSERT_TRUE(held->read_exact(payload).is_ok());
    Result<tp::Held> announced = tp::decode_held(payload);
    ASSERT_TRUE(announced.is_ok());
    EXPECT_EQ(announced->verdict_within_ms, 3200u);
    EXPECT_EQ(announced->answers_ahead, 0u);
  }
  EXPECT_TRUE(handshake_from("127.0.0.2", kSecret).is_ok());
  EXPECT_FALSE(held->wait_readable(0ms)) << "the held answer got its verdict before the other address got in";
  {
    Watchdog watchdog(*held, 30s);
    Result<tp::IncomingFrame> verdict = held->read_frame();
    ASSERT_TRUE(verdict.is_ok()) << verdict.status().to_string();
    const auto* refusal = std::get_if<tp::Error>(&verdict->message);
    ASSERT_NE(refusal, nullptr);
    EXPECT_EQ(refusal->code, tp::ErrorCode::kAuthFailed);
  }
  EXPECT_TRUE(process_->alive());
}

TEST(WorkerCli, SecretFileWorks) {
  const std::string secret_file = ::testing::TempDir() + "tessera_secret";
  std::ofstream(secret_file) << kSecret << "\n";
  ::chmod(secret_file.c_str(), 0600);
  ChildProcess child({"--listen", "127.0.0.1:0", "--threads", "1", "--secret-file", secret_file}, false);
  ASSERT_TRUE(child.started());
  const auto line = child.read_stdout_line(20s);
  ASSERT_TRUE(line.has_value());
  const auto at = line->rfind(':');
  const auto port = static_cast<uint16_t>(std::stoi(line->substr(at + 1)));
  auto session = tp::FrameConnection::connect("127.0.0.1", port, 5s);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  Watchdog watchdog(**session, 20s);
  EXPECT_TRUE(tp::client_handshake(**session, kSecret).is_ok()) << "trailing newline must be ignored";
  std::remove(secret_file.c_str());
}

}  // namespace
}  // namespace tessera::worker
