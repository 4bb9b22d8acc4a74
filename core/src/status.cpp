#include "tessera/core/status.hpp"

namespace tessera {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kInvalidConfig: return "InvalidConfig";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kNetworkError: return "NetworkError";
    case StatusCode::kProtocolError: return "ProtocolError";
    case StatusCode::kAuthFailed: return "AuthFailed";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kBusy: return "Busy";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kVerificationFailed: return "VerificationFailed";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kCancelled: return "Cancelled";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(code_, std::string(context) + message_);
}

}  // namespace tessera
