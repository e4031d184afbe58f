// Status: the outcome of an operation that can fail for expected reasons (bad input, a missing
// file, a peer that went away). Exceptions are kept for programming errors and out-of-memory.
// Messages say what was expected, what was found, and where.
//
// Thread-safety: a Status is a value; copies are independent.
#pragma once

#include <string>
#include <utility>

namespace servesweep {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

}  // namespace servesweep
