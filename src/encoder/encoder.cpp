#include "rapidqa/encoder.h"

#include <fmt/format.h>

namespace rapidqa {

std::string Encoder::fingerprint() const { return fmt::format("{}/dim={}", name(), dimension()); }

Status Encoder::restore_learned_state(const std::string& state) {
  if (state.empty()) return Status::ok();
  return Status::invalid_argument(fmt::format("encoder {} learns nothing, so it has no state to restore", name()));
}

}  // namespace rapidqa
