// Status: the outcome of an operation that can fail for expected reasons (bad input, a missing
// file, a peer that went away). Exceptions are kept for programming errors and out-of-memory;
// no expected failure crosses a module boundary as an exception.
//
// A failed Status has a code and a message. The code says what the caller may do about it (the
// codes are gRPC's/absl's, so their meaning is known): a permanent failure (invalid argument,
// not found, ...) is reported once and never retried; only a transient one (unavailable,
// deadline exceeded) is worth another attempt. Messages say what was expected, what was found,
// and where (file:line:column for inputs).
//
// A Status is [[nodiscard]]: a caller that drops one fails to compile. Where a failure is
// deliberately of no consequence (best-effort cleanup), say so with IgnoreError() and a comment.
//
// Thread-safety: a Status is a value; copies are independent.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace servesweep {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the input is wrong (a matrix, a setting, a flag): fix it, do not retry
  kNotFound,            // a file, profile, table or record that should exist does not
  kAlreadyExists,       // something would be overwritten (an output folder holding a sweep)
  kFailedPrecondition,  // the system is not in a state to do it (no GPU, a tool missing)
  kPermissionDenied,    // refused by a rule (an unknown CurveZMQ key)
  kUnavailable,         // transient: a peer or engine is not reachable now; retrying may work
  kDeadlineExceeded,    // transient: it took longer than allowed
  kCancelled,           // stopped on request (a signal, a drain)
  kInternal,            // an unexpected failure (I/O, a library error, a broken invariant)
};

// "invalid argument", "not found", ...: for logs and stored attempt outcomes.
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status NotFound(std::string message) {
    return Status(StatusCode::kNotFound, std::move(message));
  }
  static Status AlreadyExists(std::string message) {
    return Status(StatusCode::kAlreadyExists, std::move(message));
  }
  static Status FailedPrecondition(std::string message) {
    return Status(StatusCode::kFailedPrecondition, std::move(message));
  }
  static Status PermissionDenied(std::string message) {
    return Status(StatusCode::kPermissionDenied, std::move(message));
  }
  static Status Unavailable(std::string message) {
    return Status(StatusCode::kUnavailable, std::move(message));
  }
  static Status DeadlineExceeded(std::string message) {
    return Status(StatusCode::kDeadlineExceeded, std::move(message));
  }
  static Status Cancelled(std::string message) {
    return Status(StatusCode::kCancelled, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(StatusCode::kInternal, std::move(message));
  }
  // A failure of a given code (e.g. one read back from the wire or the database).
  static Status FromCode(StatusCode code, std::string message) {
    return code == StatusCode::kOk ? Status() : Status(code, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Whether the same call may succeed later (unavailable, deadline exceeded); every other
  // failure is permanent for the same input.
  bool transient() const {
    return code_ == StatusCode::kUnavailable || code_ == StatusCode::kDeadlineExceeded;
  }

  // Drops this status on purpose; the call site's comment says why nothing follows from it.
  void IgnoreError() const {}

  // The same failure with "prefix: " before its message (where it happened); Ok stays Ok.
  Status Prefixed(std::string_view prefix) const {
    if (ok()) return *this;
    return Status(code_, std::string(prefix) + ": " + message_);
  }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kAlreadyExists:
      return "already exists";
    case StatusCode::kFailedPrecondition:
      return "failed precondition";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kDeadlineExceeded:
      return "deadline exceeded";
    case StatusCode::kCancelled:
      return "cancelled";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

}  // namespace servesweep
