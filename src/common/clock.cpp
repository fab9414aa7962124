#include "rapidqa/clock.h"

namespace rapidqa {

void Clock::wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point deadline) const {
  const auto left = deadline - now();
  if (left <= duration::zero()) return;
  cv.wait_for(lock, left);
}

void ManualClock::wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                             time_point deadline) const {
  if (now() >= deadline) return;
  cv.wait_for(lock, std::chrono::milliseconds(1));
}

std::shared_ptr<Clock> steady_clock_instance() {
  static const std::shared_ptr<Clock> instance = std::make_shared<SteadyClock>();
  return instance;
}

}  // namespace rapidqa
