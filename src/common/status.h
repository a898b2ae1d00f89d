// Errors as values. A Status is OK or carries a code and a one-line message;
// StatusOr<T> is a Status or a T. Context is prefixed on the way up:
//   return st.Prefixed("config line 12");  ->  "config line 12: <message>"
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ef {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad input from the user: config, CLI, event
  kNotFound,
  kUnavailable,         // a server could not be reached or answered with a retriable error
  kFailedPrecondition,  // e.g. stored layout disagrees with config
  kInternal,
  kCancelled,
  kPermissionDenied,  // refused for good: authentication, authorization (ACL), unknown topic;
                      // retrying or restarting does not help until the config changes
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "ok" for an OK status, else the message.
  std::string ToString() const { return ok() ? std::string("ok") : message_; }
  // Returns a copy with "context: " before the message (OK stays OK).
  Status Prefixed(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
inline Status FailedPrecondition(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
inline Status PermissionDenied(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Internal("StatusOr constructed from OK status without a value");
  }
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace ef

#define EF_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::ef::Status ef_status_ = (expr);        \
    if (!ef_status_.ok()) return ef_status_; \
  } while (0)
