// Status and Result<T>: how errors cross Tessera's module boundaries.
//
// A Status is either OK or a code plus a message written for the person running the tool
// ("configs/lab.yaml:12: node \"pi3\" has threads: 0; use >= 1"). Result<T> holds a T or a
// non-OK Status. Both are plain values: copyable, movable, no ownership beyond their members.
// Not synchronised; share across threads only as const.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tessera {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a flag, option or input value is wrong
  kInvalidConfig,      // the cluster description or a study file is wrong
  kIoError,            // a file could not be read or written
  kNetworkError,       // connect/read/write failed, peer vanished
  kProtocolError,      // a peer sent a frame that breaks the wire protocol
  kAuthFailed,         // shared-secret challenge-response failed
  kResourceExhausted,  // a memory cap or size limit would be exceeded
  kBusy,               // a worker is serving another coordinator; try again once it is free
  kNotFound,           // a referenced tile, node or file does not exist
  kVerificationFailed, // the product did not pass its check
  kInternal,           // a bug in Tessera
  kCancelled,          // the caller asked the operation to stop (Ctrl-C, a cancel flag)
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidConfig: configs/lab.yaml:12: ..." or "OK".
  std::string to_string() const;

  // Prefixes the message with context, keeping the code ("node pi3: " + message).
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status invalid_config(std::string m) { return {StatusCode::kInvalidConfig, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status network_error(std::string m) { return {StatusCode::kNetworkError, std::move(m)}; }
inline Status protocol_error(std::string m) { return {StatusCode::kProtocolError, std::move(m)}; }
inline Status auth_failed(std::string m) { return {StatusCode::kAuthFailed, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status verification_failed(std::string m) { return {StatusCode::kVerificationFailed, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

// A T or the Status saying why there is none. Constructing from an OK Status is a bug.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(state_).is_ok() && "Result built from an OK Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }

  // REQUIRES: is_ok()
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // OK when a value is held.
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(state_); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace tessera

// Early return of a non-OK Status from a function returning Status or Result<U>.
#define TESSERA_RETURN_IF_ERROR(expr)                 \
  do {                                                \
    ::tessera::Status tessera_status_ = (expr);       \
    if (!tessera_status_.is_ok()) return tessera_status_; \
  } while (0)
