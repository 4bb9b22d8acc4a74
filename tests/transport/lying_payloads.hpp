// A payload that lies about its own lengths or counts, and how a decoder must refuse it: with
// kProtocolError naming what is wrong, before allocating what the payload claims. Shared by the
// codec tests of transport's messages and the GEMM service's.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "alloc_counter.hpp"
#include "status_assertions.hpp"
#include "tessera/core/status.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::testing {

struct LyingPayload {
  const char* name;
  transport::MessageType type;
  std::vector<std::byte> payload;
  const char* expected;  // in the refusal's message
};

// decode(type, payload) must fail as each case says, allocating under kSmallAllocation.
template <typename Decode>
void expect_refused_before_allocating(const std::vector<LyingPayload>& cases, Decode decode) {
  for (const LyingPayload& c : cases) {
    SCOPED_TRACE(c.name);
    const auto [status, allocated] = transport::testing::counted([&] { return decode(static_cast<uint16_t>(c.type), c.payload); });
    EXPECT_TRUE(fails_with(status, StatusCode::kProtocolError, c.expected));
    EXPECT_LT(allocated, transport::testing::kSmallAllocation);
  }
}

}  // namespace tessera::testing
