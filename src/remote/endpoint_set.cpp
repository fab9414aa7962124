#include "remote/endpoint_set.h"

#include <algorithm>

namespace rapidqa::remote {

EndpointSet::EndpointSet(std::vector<std::string> urls, EndpointSetOptions options) : options_(options) {
  for (auto& u : urls) {
    auto e = std::make_unique<Endpoint>();
    e->url = std::move(u);
    endpoints_.push_back(std::move(e));
  }
}

std::optional<std::size_t> EndpointSet::pick(const std::vector<std::size_t>& avoid, RequestKind kind, TimePoint now) {
  std::optional<std::size_t> chosen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t n = endpoints_.size();
    // Two passes: the first honours `avoid`, the second (only when the first
    // found nothing) lets a retry go back to an endpoint it already tried.
    for (int pass = 0; pass < 2 && !chosen; ++pass) {
      const auto usable = [&](std::size_t i) {
        if (ejected_locked(*endpoints_[i], now)) return false;
        return pass == 1 || std::find(avoid.begin(), avoid.end(), i) == avoid.end();
      };
      if (options_.choice == EndpointChoice::kRoundRobin) {
        for (std::size_t k = 0; k < n && !chosen; ++k) {
          const std::size_t i = (next_ + k) % n;
          if (usable(i)) chosen = i;
        }
        if (chosen) next_ = (*chosen + 1) % n;
      } else {
        // Fewest in flight; ties go to the lower recent latency, then to the
        // one after the last chosen, so idle endpoints share the load.
        for (std::size_t k = 0; k < n; ++k) {
          const std::size_t i = (next_ + k) % n;
          if (!usable(i)) continue;
          if (!chosen) {
            chosen = i;
            continue;
          }
          const Endpoint& a = *endpoints_[i];
          const Endpoint& b = *endpoints_[*chosen];
          const std::size_t fa = a.in_flight.load(), fb = b.in_flight.load();
          if (fa < fb || (fa == fb && a.recent_ns < b.recent_ns * 0.8)) chosen = i;
        }
        if (chosen) next_ = (*chosen + 1) % n;
      }
    }
  }
  if (!chosen) return std::nullopt;
  Endpoint& e = *endpoints_[*chosen];
  e.in_flight.fetch_add(1);
  e.requests.fetch_add(1);
  if (kind == RequestKind::kRetry) e.retries.fetch_add(1);
  if (kind == RequestKind::kHedge) e.hedges.fetch_add(1);
  return chosen;
}

void EndpointSet::finished(std::size_t i, bool failed, bool abandoned, std::chrono::nanoseconds elapsed, TimePoint now,
                           std::optional<std::chrono::nanoseconds> cool_down) {
  Endpoint& e = *endpoints_[i];
  e.in_flight.fetch_sub(1);
  if (abandoned) return;
  if (failed) e.failures.fetch_add(1);
  else e.latency.record(elapsed);
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed) {
    e.consecutive_failures = 0;
    const double ns = static_cast<double>(elapsed.count());
    e.recent_ns = e.recent_ns == 0 ? ns : 0.8 * e.recent_ns + 0.2 * ns;
    if (recent_.size() < options_.recent_latencies) {
      recent_.push_back(elapsed.count());
    } else {
      recent_[recent_next_] = elapsed.count();
      recent_next_ = (recent_next_ + 1) % recent_.size();
    }
    return;
  }
  ++e.consecutive_failures;
  // An engine that said when to come back (429 with Retry-After) is left
  // out until then, without counting as an outlier.
  if (cool_down) e.ejected_until = std::max(e.ejected_until, now + *cool_down);
  if (options_.eject_after_failures == 0 || e.consecutive_failures < options_.eject_after_failures) return;
  e.consecutive_failures = 0;
  ++e.ejections;
  const auto grows = options_.ejection_time * static_cast<std::int64_t>(std::min<std::uint64_t>(e.ejections, 64));
  e.ejected_until = std::max(e.ejected_until, now + std::min(grows, options_.max_ejection_time));
}

bool EndpointSet::all_ejected(TimePoint now) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::all_of(endpoints_.begin(), endpoints_.end(), [&](const auto& e) { return ejected_locked(*e, now); });
}

std::optional<std::chrono::nanoseconds> EndpointSet::recent_latency(double percentile) const {
  std::vector<std::int64_t> copy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (recent_.size() < 16) return std::nullopt;
    copy = recent_;
  }
  const auto k = std::min(copy.size() - 1, static_cast<std::size_t>(percentile * static_cast<double>(copy.size())));
  std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(k), copy.end());
  return std::chrono::nanoseconds(copy[k]);
}

std::vector<RemoteEndpointMetrics> EndpointSet::metrics(TimePoint now) const {
  std::vector<RemoteEndpointMetrics> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : endpoints_) {
    RemoteEndpointMetrics m;
    m.url = e->url;
    m.requests = e->requests.load();
    m.failures = e->failures.load();
    m.retries = e->retries.load();
    m.hedges = e->hedges.load();
    m.in_flight = e->in_flight.load();
    m.ejected = ejected_locked(*e, now);
    m.ejections = e->ejections;
    m.latency = e->latency.summary();
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace rapidqa::remote
