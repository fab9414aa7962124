#include "remote/circuit_breaker.h"

#include <algorithm>

namespace rapidqa::remote {

Admission CircuitBreaker::admit(TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == BreakerState::kOpen && now - opened_at_ >= options_.open_time) {
    state_ = BreakerState::kHalfOpen;
    trial_out_ = false;
  }
  switch (state_) {
    case BreakerState::kClosed:
      return Admission::kAllowed;
    case BreakerState::kHalfOpen:
      if (!trial_out_) {
        trial_out_ = true;
        return Admission::kTrial;
      }
      [[fallthrough]];
    case BreakerState::kOpen:
      ++refused_;
      return Admission::kRefused;
  }
  return Admission::kRefused;
}

void CircuitBreaker::record(bool success, bool trial, TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (trial) {
    trial_out_ = false;
    if (state_ != BreakerState::kHalfOpen) return;  // tripped meanwhile
    if (success) {
      state_ = BreakerState::kClosed;
      outcomes_.clear();
      failures_ = 0;
    } else {
      open_locked(now);
    }
    return;
  }
  // A call admitted while closed that finishes after the breaker opened
  // says nothing about the engine now.
  if (state_ != BreakerState::kClosed) return;
  outcomes_.push_back(!success);
  if (!success) ++failures_;
  if (outcomes_.size() > options_.window) {
    if (outcomes_.front()) --failures_;
    outcomes_.pop_front();
  }
  if (outcomes_.size() >= options_.min_calls &&
      static_cast<double>(failures_) >= options_.failure_ratio * static_cast<double>(outcomes_.size())) {
    open_locked(now);
  }
}

void CircuitBreaker::trip(TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != BreakerState::kOpen) open_locked(now);
}

void CircuitBreaker::open_locked(TimePoint now) {
  state_ = BreakerState::kOpen;
  opened_at_ = now;
  trial_out_ = false;
  outcomes_.clear();
  failures_ = 0;
  ++opens_;
}

BreakerState CircuitBreaker::state(TimePoint now) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == BreakerState::kOpen && now - opened_at_ >= options_.open_time) return BreakerState::kHalfOpen;
  return state_;
}

std::uint64_t CircuitBreaker::opens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return opens_;
}

std::uint64_t CircuitBreaker::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

void RetryBudget::deposit() {
  std::lock_guard<std::mutex> lock(mu_);
  // The balance grows by `ratio` per call up to a cap that grows with it:
  // a long healthy run earns no burst larger than the floor plus one
  // window's share.
  balance_ = std::min(balance_ + ratio_, cap_ + ratio_ * 100);
}

bool RetryBudget::try_spend() {
  std::lock_guard<std::mutex> lock(mu_);
  if (balance_ >= 1.0 - 1e-9) {  // ten deposits of 0.1 make one retry
    balance_ -= 1.0;
    return true;
  }
  ++refusals_;
  return false;
}

std::uint64_t RetryBudget::refusals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refusals_;
}

}  // namespace rapidqa::remote
