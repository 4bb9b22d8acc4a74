#include "tessera/worker/service.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "in_process_worker.hpp"
#include "tessera/worker/gemm_service.hpp"
#include "tessera/gemm/wire_io.hpp"
#include "worker_test_client.hpp"

namespace tessera::worker {
namespace {

namespace tp = tessera::transport;
using namespace std::chrono_literals;
using testing::InProcessWorker;
using testing::read_closed;
using testing::read_error;
using testing::read_expect;
using testing::Watchdog;

// A capability bit no real service uses.
constexpr uint64_t kTestCapability = uint64_t{1} << 20;

::testing::AssertionResult contains(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << needle << "'";
}

MessageHandler decoded(tp::MessageType type) {
  MessageHandler handler;
  handler.type = type;
  handler.on_message = [](ServiceContext&, const tp::FrameHeader&, std::span<const std::byte>) {
    return HandlerStep::kContinue;
  };
  return handler;
}

// Sums the ids of a RELEASE on the compute pool and answers from the task's completion.
class SumIdsTask final : public PoolTask {
 public:
  SumIdsTask(ServiceContext& context, std::vector<uint32_t> ids, uint64_t request_id)
      : context_(context), ids_(std::move(ids)), request_id_(request_id) {}
  std::size_t part_count(std::size_t) const override { return 1; }
  void run_part(std::size_t, std::size_t) override { sum_ = std::accumulate(ids_.begin(), ids_.end(), uint64_t{0}); }
  void complete(double) override { (void)gemm::write_message(context_.connection(), gemm::Credit{sum_, 1, 0.0}, request_id_); }

 private:
  ServiceContext& context_;
  std::vector<uint32_t> ids_;
  uint64_t request_id_;
  uint64_t sum_ = 0;
};

// A service for the dispatch tests: answers CREDIT with CREDIT(job_id + 1, credits * 2) and
// RELEASE with CREDIT(sum of the ids) computed on the compute pool. PROBE is accepted up to 24
// payload bytes and counted.
struct TestService {
  std::shared_ptr<std::atomic<int>> probes_seen = std::make_shared<std::atomic<int>>(0);

  Service make() const {
    Service service;
    service.name = "test";
    service.capability = kTestCapability;
    MessageHandler credit;
    credit.type = tp::MessageType::kCredit;
    // The service decodes the payload it is handed with its own codec, as the GEMM service does.
    credit.on_message = [](ServiceContext& context, const tp::FrameHeader& header, std::span<const std::byte> payload) {
      Result<gemm::GemmMessage> decoded =
          gemm::decode_gemm_payload(header.type, payload, gemm::limits_for(context.limits()));
      if (!decoded) return context.fail(tp::ErrorCode::kBadFrame, decoded.status().message(), header.request_id);
      const auto& asked = std::get<gemm::Credit>(*decoded);
      const Status written = gemm::write_message(context.connection(),
                                                 gemm::Credit{asked.job_id + 1, asked.credits * 2, 0.0}, header.request_id);
      return written.is_ok() ? HandlerStep::kContinue : context.read_failed(written, header.request_id);
    };
    MessageHandler release;
    release.type = tp::MessageType::kRelease;
    release.on_message = [](ServiceContext& context, const tp::FrameHeader& header, std::span<const std::byte> payload) {
      Result<gemm::GemmMessage> decoded =
          gemm::decode_gemm_payload(header.type, payload, gemm::limits_for(context.limits()));
      if (!decoded) return context.fail(tp::ErrorCode::kBadFrame, decoded.status().message(), header.request_id);
      auto& ids = std::get<gemm::Release>(*decoded).tile_ids;
      context.pool().submit(std::make_unique<SumIdsTask>(context, std::move(ids), header.request_id));
      return HandlerStep::kContinue;
    };
    MessageHandler probe;
    probe.type = tp::MessageType::kProbe;
    probe.max_payload_bytes = [](const tp::Limits&) -> uint64_t { return 24; };
    probe.on_message = [seen = probes_seen](ServiceContext&, const tp::FrameHeader&, std::span<const std::byte> payload) {
      EXPECT_LE(payload.size(), 24u);
      ++*seen;
      return HandlerStep::kContinue;
    };
    service.handlers = {credit, release, probe};
    return service;
  }
};

TEST(ServiceTable, BuildsTheDispatchTableFromTheServices) {
  Result<ServiceTable> table =
      ServiceTable::build({gemm_service(), Service{"echo", kTestCapability, {decoded(tp::MessageType::kCredit)}}});
  ASSERT_TRUE(table) << table.status().to_string();
  EXPECT_EQ(table->capabilities(),
            tp::kCapabilityGemm | tp::kCapabilityExpression | tp::kCapabilityTransposedJobs | tp::kCapabilityForward |
                tp::kCapabilityTileSend | kTestCapability);
  for (tp::MessageType type : {tp::MessageType::kStore, tp::MessageType::kJob, tp::MessageType::kRelease,
                               tp::MessageType::kCredit, tp::MessageType::kProbe, tp::MessageType::kStatsRequest}) {
    SCOPED_TRACE(tp::message_type_name(static_cast<uint16_t>(type)));
    const MessageHandler* handler = table->find(static_cast<uint16_t>(type));
    ASSERT_NE(handler, nullptr);
    EXPECT_EQ(handler->type, type);
  }
  // STORE streams its data straight into tile memory and PROBE its echo into memory charged to
  // the cap; the others are decoded first.
  EXPECT_TRUE(table->find(static_cast<uint16_t>(tp::MessageType::kStore))->on_stream);
  EXPECT_TRUE(table->find(static_cast<uint16_t>(tp::MessageType::kProbe))->on_stream);
  EXPECT_TRUE(table->find(static_cast<uint16_t>(tp::MessageType::kJob))->on_message);
  for (uint16_t unhandled : {uint16_t{0}, static_cast<uint16_t>(tp::MessageType::kBye),
                             static_cast<uint16_t>(tp::MessageType::kResult), uint16_t{99}, uint16_t{0xFFFF}}) {
    EXPECT_EQ(table->find(unhandled), nullptr) << unhandled;
  }
  EXPECT_EQ(table->describe(), "gemm (PROBE, STORE, JOB, RELEASE, STATS_REQUEST, FORWARD_SETUP, SEND_TILE, BLOCK_QUERY, BLOCK_LOAD; from peers: "
            "FORWARD_SETUP, STORE); echo (CREDIT)");
}

TEST(ServiceTable, RefusesConflictingOrMalformedServices) {
  auto service = [](std::string name, std::vector<MessageHandler> handlers) {
    return Service{std::move(name), 0, std::move(handlers)};
  };
  struct Case {
    const char* what;
    std::vector<Service> services;
    std::string message;
  };
  MessageHandler both = decoded(tp::MessageType::kCredit);
  both.on_stream = [](ServiceContext&, const tp::FrameHeader&) { return HandlerStep::kContinue; };
  MessageHandler neither;
  neither.type = tp::MessageType::kCredit;
  const std::vector<Case> cases = {
      {"same type twice", {gemm_service(), service("other", {decoded(tp::MessageType::kJob)})},
       "worker service 'other': handler for JOB: service 'gemm' already handles it"},
      {"overlapping services", {gemm_service(), TestService{}.make()},
       "worker service 'test': handler for RELEASE: service 'gemm' already handles it"},
      {"session message", {service("bye", {decoded(tp::MessageType::kBye)})},
       "handler for BYE: the session itself answers that message"},
      {"handshake message", {service("auth", {decoded(tp::MessageType::kAuth)})}, "the session itself answers"},
      {"unknown type", {service("odd", {decoded(static_cast<tp::MessageType>(99))})}, "UNKNOWN(99): not a message type"},
      {"both functions", {service("both", {both})}, "set exactly one of on_message and on_stream"},
      {"no function", {service("none", {neither})}, "set exactly one of on_message and on_stream"},
      {"no name", {service("", {})}, "worker service #1 has no name"},
      {"same name", {service("x", {}), service("x", {})}, "worker service 'x' is registered twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Result<ServiceTable> table = ServiceTable::build(c.services);
    ASSERT_FALSE(table);
    EXPECT_EQ(table.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(table.status().message(), c.message));
  }
}

TEST(ServiceTable, EmptyTableOffersNothing) {
  Result<ServiceTable> table = ServiceTable::build({});
  ASSERT_TRUE(table);
  EXPECT_EQ(table->capabilities(), 0u);
  EXPECT_EQ(table->describe(), "no services");
}

TEST(ServiceDispatch, RegisteredServiceReceivesItsMessageTypes) {
  TestService test_service;
  InProcessWorker worker({test_service.make()});
  ASSERT_TRUE(worker.running());
  tp::Hello hello;
  auto session = worker.open_session(&hello);
  ASSERT_NE(session, nullptr);
  Watchdog watchdog(*session, 30s);
  EXPECT_EQ(hello.capabilities, kTestCapability | tp::kCapabilityTls) << "HELLO advertises the hosted services' bits";

  testing::AnyFrame frame;
  for (uint64_t job_id : {10u, 20u}) {
    ASSERT_TRUE(gemm::write_message(*session, gemm::Credit{job_id, 3, 0.0}, job_id + 1000).is_ok());
    ASSERT_TRUE(read_expect<gemm::Credit>(*session, frame));
    EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, job_id + 1);
    EXPECT_EQ(std::get<gemm::Credit>(frame.message).credits, 6u);
    EXPECT_EQ(frame.header.request_id, job_id + 1000);
  }
  // A handler may hand work to the compute pool; the task answers from its completion.
  ASSERT_TRUE(gemm::write_message(*session, gemm::Release{{1, 2, 39}}, 7).is_ok());
  ASSERT_TRUE(read_expect<gemm::Credit>(*session, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 42u);
  EXPECT_EQ(frame.header.request_id, 7u);

  ASSERT_TRUE(session->write_message(tp::Bye{}).is_ok());
  ASSERT_TRUE(read_expect<tp::Bye>(*session, frame));
}

TEST(ServiceDispatch, UnhandledTypeGetsBadFrameAndEndsTheSession) {
  InProcessWorker worker({TestService{}.make()});
  ASSERT_TRUE(worker.running());
  for (const gemm::GemmMessage& message :
       std::vector<gemm::GemmMessage>{testing::gemm_job(1, 1, 2, 3, 4, 4, 4), gemm::StatsRequest{}}) {
    auto session = worker.open_session();
    ASSERT_NE(session, nullptr);
    Watchdog watchdog(*session, 30s);
    const std::string name = tp::message_type_name(static_cast<uint16_t>(gemm::gemm_message_type(message)));
    SCOPED_TRACE(name);
    ASSERT_TRUE(gemm::write_message(*session, message, 5).is_ok());
    std::string why;
    EXPECT_TRUE(read_error(*session, tp::ErrorCode::kBadFrame, &why));
    EXPECT_TRUE(contains(why, "unexpected " + name + " from the coordinator: no service of this worker handles it "
                              "(services: test (CREDIT, RELEASE, PROBE))"));
    EXPECT_TRUE(read_closed(*session));
  }
}

TEST(ServiceDispatch, PayloadBoundIsCheckedBeforeTheHandlerRuns) {
  TestService test_service;
  InProcessWorker worker({test_service.make()});
  ASSERT_TRUE(worker.running());
  auto session = worker.open_session();
  ASSERT_NE(session, nullptr);
  Watchdog watchdog(*session, 30s);
  gemm::Probe small{gemm::ProbeKind::kEcho, 0, 0.0, {1, 2, 3, 4}};  // 24 bytes: within the bound
  ASSERT_TRUE(gemm::write_message(*session, small).is_ok());
  gemm::Probe large{gemm::ProbeKind::kEcho, 0, 0.0, std::vector<uint8_t>(5)};  // 25 bytes
  ASSERT_TRUE(gemm::write_message(*session, large).is_ok());
  std::string why;
  EXPECT_TRUE(read_error(*session, tp::ErrorCode::kBadFrame, &why));
  EXPECT_TRUE(contains(why, "PROBE payload of 25 bytes exceeds the 24-byte limit"));
  EXPECT_TRUE(read_closed(*session));
  EXPECT_EQ(test_service.probes_seen->load(), 1);
}

TEST(ServiceDispatch, WorkerWithoutServicesStillAuthenticatesAndRefusesWork) {
  InProcessWorker worker({});
  ASSERT_TRUE(worker.running());
  EXPECT_EQ(worker.server().services().capabilities(), 0u);
  tp::Hello hello;
  auto session = worker.open_session(&hello);
  ASSERT_NE(session, nullptr);
  Watchdog watchdog(*session, 30s);
  EXPECT_EQ(hello.capabilities, tp::kCapabilityTls) << "no service, only the wire's ability to encrypt";
  ASSERT_TRUE(testing::store_tile(*session, 1, testing::Dense(2, 2)).is_ok());
  std::string why;
  EXPECT_TRUE(read_error(*session, tp::ErrorCode::kBadFrame, &why));
  EXPECT_TRUE(contains(why, "unexpected STORE from the coordinator: no service of this worker handles it (services: "
                            "no services)"));
}

TEST(ServiceDispatch, ConflictingServicesKeepTheWorkerFromStarting) {
  WorkerOptions options;
  options.listen_host = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.secret = "s";
  auto started = WorkerServer::start(options, {gemm_service(), gemm_service()});
  ASSERT_FALSE(started.is_ok());
  EXPECT_EQ(started.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(started.status().message(), "worker service 'gemm' is registered twice"));
}

}  // namespace
}  // namespace tessera::worker
