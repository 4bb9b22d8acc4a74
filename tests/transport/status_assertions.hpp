// GoogleTest assertions on a Status, shared by the codec tests (transport's, gemm's, graph's):
// a refusal must carry the expected code and name what it refuses.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "tessera/core/status.hpp"

namespace tessera::testing {

// Fails unless `status` failed with `code` and its message contains `needle`.
inline ::testing::AssertionResult fails_with(const Status& status, StatusCode code, std::string_view needle) {
  if (status.is_ok()) return ::testing::AssertionFailure() << "expected failure containing '" << needle << "', got OK";
  if (status.code() != code || status.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "expected " << status_code_name(code) << " containing '" << needle
                                         << "', got " << status.to_string();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::testing
