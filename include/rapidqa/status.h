// Status and Result<T>: how every fallible public call of rapidqa reports
// failure. A Status is cheap to copy when OK (no allocation); an error carries
// a code and a message meant for a person ("line 12: field 'answer' is
// missing"). Exceptions never cross the public API: anything thrown inside
// (by LibTorch, FAISS or the standard library) is turned into a Status.
//
// Thread safety: value types; thread-compatible.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "rapidqa/export.h"

namespace rapidqa {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller's input is wrong (empty question, bad JSON)
  kNotFound,          // an id, file or model that does not exist
  kAlreadyExists,     // adding an id that is already there
  kOutOfRange,        // a size or limit exceeded (oversize question)
  kFailedPrecondition,// the object is not in a state to do this (no knowledge)
  kResourceExhausted, // a queue or capacity is full
  kDeadlineExceeded,  // the request ran out of time
  kDataLoss,          // a file is corrupt or truncated
  kIoError,           // the operating system refused a read or write
  kUnavailable,       // a remote service (Redis) cannot be reached
  kInternal,          // a bug or an unexpected exception in a dependency
};

// Returns a stable lower-case name ("invalid_argument") for a code.
RAPIDQA_EXPORT const char* status_code_name(StatusCode code) noexcept;

class [[nodiscard]] RAPIDQA_EXPORT Status {
 public:
  Status() noexcept = default;  // OK
  Status(StatusCode code, std::string message);

  static Status ok() noexcept { return Status(); }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status already_exists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status deadline_exceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
  static Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool is_ok() const noexcept { return state_ == nullptr; }
  explicit operator bool() const noexcept { return is_ok(); }
  StatusCode code() const noexcept { return state_ ? state_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const noexcept;
  // "invalid_argument: line 3: ..." or "ok".
  std::string to_string() const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;  // null means OK
};

// Either a value or an error Status. Accessing value() of an error is a
// programming error (asserted in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.is_ok() && "a Result built from a Status must hold an error");
    if (status_.is_ok()) status_ = Status::internal("Result built from an OK status without a value");
  }

  bool is_ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return is_ok(); }
  const Status& status() const noexcept { return status_; }

  T& value() & { assert(is_ok()); return *value_; }
  const T& value() const& { assert(is_ok()); return *value_; }
  T&& value() && { assert(is_ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace rapidqa
