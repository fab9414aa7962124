#include "rapidqa/clock.h"

namespace rapidqa {

std::shared_ptr<Clock> steady_clock_instance() {
  static const std::shared_ptr<Clock> instance = std::make_shared<SteadyClock>();
  return instance;
}

}  // namespace rapidqa
