#include "cache/redis_relay.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "cache/change_message.h"
#include "cache/redis_client.h"
#include "common/bounded_json.h"
#include "common/random_id.h"

namespace rapidqa::cache {
namespace {

using SteadyTime = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Appends to the log and publishes on the channel in one step, so every
// message on the channel names the log entry holding the same change (the
// subscriber's cursor) and no change is ever in one and not the other.
// The channel copy is the log copy with "stream_id" spliced in after its
// opening brace. KEYS[1] = log, ARGV = log length, message, channel.
constexpr const char* kPublishScript = R"lua(
if redis.replicate_commands then redis.replicate_commands() end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'change', ARGV[2])
redis.call('PUBLISH', ARGV[3], '{"stream_id":"' .. id .. '",' .. string.sub(ARGV[2], 2))
return id
)lua";

constexpr std::size_t kSendBatch = 64;      // changes per pipelined round trip
constexpr std::size_t kReplayPage = 256;    // log entries per XRANGE

std::string preview(const std::string& payload) {
  constexpr std::size_t kShown = 80;
  return payload.size() <= kShown ? payload : payload.substr(0, kShown) + "...";
}

// What XINFO STREAM says; kUnavailable when Redis refuses the command.
Result<ChangeLogState> read_log_state(RedisConnection& connection, const std::string& key) {
  auto reply = connection.command({"XINFO", "STREAM", key});
  if (!reply) return reply.status();
  ChangeLogState state;
  if (reply->is_error()) {
    if (reply->text.find("no such key") != std::string::npos) return state;
    return Status::unavailable(fmt::format("Redis refused XINFO STREAM {}: {}", key, reply->text));
  }
  if (!reply->is_array()) return Status::unavailable("Redis answered XINFO STREAM with something other than a list");
  state.exists = true;
  const auto& fields = reply->elements;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& name = fields[i].text;
    const RedisReply& value = fields[i + 1];
    if (name == "length") {
      state.length = static_cast<std::uint64_t>(std::max<long long>(0, value.integer));
    } else if (name == "last-generated-id") {
      if (auto id = StreamId::parse(value.text)) state.last_generated = *id;
    } else if (name == "max-deleted-entry-id") {
      state.max_deleted = StreamId::parse(value.text);
    } else if (name == "entries-added") {
      state.entries_added = static_cast<std::uint64_t>(std::max<long long>(0, value.integer));
    } else if (name == "first-entry" && value.is_array() && !value.elements.empty()) {
      if (auto id = StreamId::parse(value.elements[0].text)) state.first_entry = *id;
    }
  }
  return state;
}

}  // namespace

Status validate_redis_sync_options(const RedisSyncOptions& o) {
  if (o.port < 1 || o.port > 65535) return Status::invalid_argument(fmt::format("redis.port {} is outside 1..65535", o.port));
  if (o.channel_prefix.empty()) return Status::invalid_argument("redis.channel_prefix must not be empty");
  if (o.client_name.find_first_of(" \t\r\n") != std::string::npos) {
    return Status::invalid_argument("redis.client_name must not contain spaces (Redis refuses such names)");
  }
  const std::pair<const char*, milliseconds> durations[] = {{"connect_timeout", o.connect_timeout},
                                                            {"command_timeout", o.command_timeout},
                                                            {"reconnect_interval", o.reconnect_interval},
                                                            {"heartbeat_interval", o.heartbeat_interval}};
  for (const auto& [name, value] : durations) {
    if (value.count() <= 0) return Status::invalid_argument(fmt::format("redis.{} must be positive", name));
  }
  if (o.max_queued_changes == 0) return Status::invalid_argument("redis.max_queued_changes must be at least 1");
  if (o.change_log_length == 0) return Status::invalid_argument("redis.change_log_length must be at least 1");
  return Status::ok();
}

struct RedisRelay::Link {
  Link(RedisConnection pub, RedisConnection sub) : publisher(std::move(pub)), subscriber(std::move(sub)) {}
  RedisConnection publisher;
  RedisConnection subscriber;
  SteadyTime::time_point last_heard = SteadyTime::now();  // anything read on the subscription
  std::optional<SteadyTime::time_point> ping_sent;        // a heartbeat PING not yet answered
};

RedisRelay::RedisRelay(RedisSyncOptions options, std::string instance_id, Callbacks callbacks)
    : options_(std::move(options)),
      instance_id_(std::move(instance_id)),
      callbacks_(std::move(callbacks)),
      channel_(options_.channel_prefix + ":changes"),
      stream_key_(options_.channel_prefix + ":changelog"),
      epoch_key_(options_.channel_prefix + ":epoch"),
      client_name_(options_.client_name.empty() ? "rapidqa-" + instance_id_ : options_.client_name),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

Result<std::unique_ptr<RedisRelay>> RedisRelay::start(RedisSyncOptions options, std::string instance_id,
                                                      Callbacks callbacks) {
  Status valid = validate_redis_sync_options(options);
  if (!valid.is_ok()) return valid;
  std::unique_ptr<RedisRelay> relay(new RedisRelay(std::move(options), std::move(instance_id), std::move(callbacks)));
  if (relay->wake_fd_ < 0) return Status::io_error(fmt::format("eventfd for the Redis relay: {}", std::strerror(errno)));
  relay->thread_ = std::thread(&RedisRelay::run, relay.get());
  std::unique_lock<std::mutex> lock(relay->started_mu_);
  relay->started_cv_.wait(lock, [&] { return relay->first_attempt_done_; });
  return relay;
}

RedisRelay::~RedisRelay() {
  stopping_.store(true, std::memory_order_release);
  wake();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void RedisRelay::publish(const KnowledgeChange& change) {
  std::string message;
  try {
    message = encode_change_message(change);
  } catch (const std::exception&) {
    // Only memory can run out here; the peers learn that a change is lost.
    std::lock_guard<std::mutex> lock(mu_);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    peers_missed_changes_ = true;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= options_.max_queued_changes) {
      // The newest changes matter most; peers learn that one was lost.
      queue_.pop_front();
      dropped_.fetch_add(1, std::memory_order_relaxed);
      peers_missed_changes_ = true;
    }
    queue_.push_back({next_sequence_++, std::move(message)});
  }
  wake();
}

RedisRelayStats RedisRelay::stats() const {
  RedisRelayStats s;
  s.connected = connected_.load(std::memory_order_relaxed);
  s.outages = outages_.load(std::memory_order_relaxed);
  s.published = published_.load(std::memory_order_relaxed);
  s.received = received_.load(std::memory_order_relaxed);
  s.replayed = replayed_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.malformed = malformed_.load(std::memory_order_relaxed);
  s.gaps = gaps_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  s.queued = queue_.size();
  return s;
}

void RedisRelay::wake() {
  if (wake_fd_ < 0) return;
  const std::uint64_t one = 1;
  // A full counter already means "wake up", so a failed write loses nothing.
  (void)!write(wake_fd_, &one, sizeof one);
}

void RedisRelay::wait_until(SteadyTime::time_point deadline) {
  while (!stopping()) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyTime::now()).count();
    if (left <= 0) return;
    pollfd wake_poll{wake_fd_, POLLIN, 0};
    if (poll(&wake_poll, 1, static_cast<int>(std::min<long long>(left, 1000))) > 0) {
      std::uint64_t drained;
      (void)!read(wake_fd_, &drained, sizeof drained);
    }
  }
}

void RedisRelay::log(LogLevel level, const std::string& message) const {
  if (callbacks_.log) callbacks_.log(level, message);
}

void RedisRelay::run() {
  // A write to a connection Redis has closed must fail with EPIPE, not kill
  // the host process; every Redis socket is written on this thread only.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  pthread_setname_np(pthread_self(), "rapidqa-redis");

  bool at_start = true;
  auto first_attempt_over = [&] {
    if (!at_start) return;
    at_start = false;
    std::lock_guard<std::mutex> lock(started_mu_);
    first_attempt_done_ = true;
    started_cv_.notify_all();
  };
  while (!stopping()) {
    Status status;
    try {
      status = connect(at_start);
      if (status.is_ok()) {
        link_up();
        first_attempt_over();
        status = serve();
      }
    } catch (const std::exception& e) {
      status = Status::internal(fmt::format("unexpected error in the Redis relay: {}", e.what()));
    }
    link_.reset();
    connected_.store(false, std::memory_order_relaxed);
    if (stopping()) break;
    link_lost(status);
    first_attempt_over();
    wait_until(SteadyTime::now() + options_.reconnect_interval);
  }
  first_attempt_over();
}

void RedisRelay::link_lost(const Status& why) {
  if (outage_logged_) return;
  outage_logged_ = true;
  down_since_ = SteadyTime::now();
  outages_.fetch_add(1, std::memory_order_relaxed);
  log(LogLevel::kWarning,
      fmt::format("Redis at {}:{} is unreachable ({}); this instance keeps answering from its own knowledge and "
                  "caches, queues its changes for the other instances, and retries every {} ms",
                  options_.host, options_.port, why.message(), options_.reconnect_interval.count()));
}

void RedisRelay::link_up() {
  connected_.store(true, std::memory_order_relaxed);
  if (!ever_connected_) {
    ever_connected_ = true;
    if (!outage_logged_) {
      log(LogLevel::kInfo, fmt::format("sharing knowledge changes through Redis at {}:{} on channel {}",
                                       options_.host, options_.port, channel_));
    }
  }
  if (!outage_logged_) return;
  outage_logged_ = false;
  const double seconds = std::chrono::duration<double>(SteadyTime::now() - down_since_).count();
  std::size_t waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting = queue_.size();
  }
  log(LogLevel::kInfo, fmt::format("Redis at {}:{} is reachable again after {:.1f} s; sending {} queued changes",
                                   options_.host, options_.port, seconds, waiting));
}

Status RedisRelay::connect(bool at_start) {
  auto publisher = RedisConnection::connect(options_.host, options_.port, options_.connect_timeout,
                                            options_.command_timeout);
  if (!publisher) return publisher.status();
  // Named connections let an operator see in CLIENT LIST which instance is which.
  auto named = publisher->command({"CLIENT", "SETNAME", client_name_ + ":pub"});
  if (!named) return named.status();

  // The epoch key outlives a connection but not Redis's data: a new value
  // means the log this instance's cursor points into is gone.
  publisher->append({"SET", epoch_key_, detail::random_hex_id(), "NX"});
  publisher->append({"GET", epoch_key_});
  auto set = publisher->read_reply();
  if (!set) return set.status();
  auto epoch = publisher->read_reply();
  if (!epoch) return epoch.status();
  if (!epoch->is_text()) {
    return Status::unavailable(fmt::format("Redis refused to keep the key {}: {}", epoch_key_,
                                           epoch->is_error() ? epoch->text : "no value"));
  }
  if (!cursor_) {
    if (!at_start && unresolved_gap_.empty()) {
      unresolved_gap_ = "this instance started while Redis was unreachable, so it cannot tell which changes it missed";
    }
    // Read before subscribing: whatever is added between the two is
    // replayed below, so nothing falls in between.
    auto state = read_log_state(*publisher, stream_key_);
    if (!state) return state.status();
    cursor_ = state->exists ? state->last_generated : StreamId{};
  } else if (epoch->text != epoch_) {
    unresolved_gap_ = "Redis lost its data (restarted without persistence?) and the change log with it";
    cursor_ = StreamId{};
  }
  epoch_ = epoch->text;

  auto subscriber = RedisConnection::connect(options_.host, options_.port, options_.connect_timeout,
                                             options_.command_timeout);
  if (!subscriber) return subscriber.status();
  named = subscriber->command({"CLIENT", "SETNAME", client_name_ + ":sub"});
  if (!named) return named.status();
  auto subscribed = subscriber->command({"SUBSCRIBE", channel_});
  if (!subscribed) return subscribed.status();
  if (subscribed->is_error()) return Status::unavailable(fmt::format("Redis refused SUBSCRIBE: {}", subscribed->text));
  link_ = std::make_unique<Link>(std::move(publisher).value(), std::move(subscriber).value());
  return resync(*cursor_);
}

Status RedisRelay::resync(StreamId replay_after) {
  // Subscribed already, so every change added from here on also arrives on
  // the channel; the overlap is skipped by stream id in handle_message.
  StreamId from = replay_after;
  for (;;) {
    auto page = link_->publisher.command(
        {"XRANGE", stream_key_, from.next().to_string(), "+", "COUNT", std::to_string(kReplayPage)});
    if (!page) return page.status();
    if (page->is_error()) return Status::unavailable(fmt::format("Redis refused XRANGE: {}", page->text));
    for (const RedisReply& entry : page->elements) {
      if (stopping()) return Status::ok();
      if (!entry.is_array() || entry.elements.size() < 2) continue;
      auto id = StreamId::parse(entry.elements[0].text);
      if (!id) {
        return Status::unavailable(
            fmt::format("Redis returned a bad stream id '{}'", detail::clip_for_message(entry.elements[0].text)));
      }
      from = *id;
      std::string payload;
      const auto& fields = entry.elements[1].elements;
      for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
        if (fields[i].text == "change") payload = fields[i + 1].text;
      }
      handle_message(payload, *id);
    }
    if (page->elements.size() < kReplayPage) break;
  }
  auto state = read_log_state(link_->publisher, stream_key_);
  if (!state) return state.status();
  std::string reason = unresolved_gap_.empty() ? missed_changes_reason(replay_after, *state) : unresolved_gap_;
  unresolved_gap_.clear();
  if (!reason.empty()) {
    gaps_.fetch_add(1, std::memory_order_relaxed);
    if (callbacks_.on_gap) callbacks_.on_gap(reason);
  }
  return Status::ok();
}

Status RedisRelay::serve() {
  link_->last_heard = SteadyTime::now();
  while (!stopping()) {
    Status sent = send_queued();
    if (!sent.is_ok()) return sent;
    Status heard = read_subscription();
    if (!heard.is_ok()) return heard;

    const auto deadline = link_->ping_sent ? *link_->ping_sent + options_.command_timeout
                                           : link_->last_heard + options_.heartbeat_interval;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyTime::now()).count();
    pollfd fds[2] = {{link_->subscriber.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = poll(fds, 2, static_cast<int>(std::clamp<long long>(left, 0, 1000)));
    if (ready < 0 && errno != EINTR) return Status::unavailable(fmt::format("poll: {}", std::strerror(errno)));
    if (ready > 0 && (fds[1].revents & POLLIN)) {
      std::uint64_t drained;
      (void)!read(wake_fd_, &drained, sizeof drained);
    }
    if (ready > 0 && (fds[0].revents & (POLLIN | POLLERR | POLLHUP))) {
      Status read = link_->subscriber.read_available();
      if (!read.is_ok()) return read;
      link_->last_heard = SteadyTime::now();
      link_->ping_sent.reset();
      heard = read_subscription();
      if (!heard.is_ok()) return heard;
    }

    // A subscription is silent while nobody changes anything, so silence
    // alone proves nothing: a PING it must answer does.
    const auto now = SteadyTime::now();
    if (link_->ping_sent) {
      if (now >= *link_->ping_sent + options_.command_timeout) {
        return Status::unavailable(
            fmt::format("no answer to PING within {} ms", options_.command_timeout.count()));
      }
    } else if (now >= link_->last_heard + options_.heartbeat_interval) {
      link_->subscriber.append({"PING"});
      Status flushed = link_->subscriber.flush();
      if (!flushed.is_ok()) return flushed;
      link_->ping_sent = now;
    }
  }
  return Status::ok();
}

Status RedisRelay::send_queued() {
  for (;;) {
    std::vector<Pending> batch;
    bool gap = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gap = peers_missed_changes_;
      peers_missed_changes_ = false;
      for (std::size_t i = 0; i < queue_.size() && i < kSendBatch; ++i) batch.push_back(queue_[i]);
    }
    if (batch.empty() && !gap) return Status::ok();

    auto script = [&](const std::string& message) {
      link_->publisher.append({"EVAL", kPublishScript, "1", stream_key_, std::to_string(options_.change_log_length),
                               message, channel_});
    };
    // The marker goes first: the changes it stands for were older.
    if (gap) script(encode_gap_message(instance_id_));
    for (const auto& p : batch) script(p.message);

    if (gap) {
      auto reply = link_->publisher.read_reply();
      if (!reply) {
        std::lock_guard<std::mutex> lock(mu_);
        peers_missed_changes_ = true;
        return reply.status();
      }
      if (reply->is_error()) log(LogLevel::kError, fmt::format("Redis refused to relay a gap marker: {}", reply->text));
    }
    std::size_t answered = 0;
    Status failure;
    bool refused = false;
    for (; answered < batch.size(); ++answered) {
      auto reply = link_->publisher.read_reply();
      if (!reply) {
        // Unanswered changes stay queued and are sent again after the
        // reconnect: a peer may then see one twice, which is harmless.
        failure = reply.status();
        break;
      }
      if (reply->is_error()) {
        refused = true;
        dropped_.fetch_add(1, std::memory_order_relaxed);
        log(LogLevel::kError, fmt::format("Redis refused a knowledge change ({}); it is dropped and the other "
                                          "instances will drop their cached answers",
                                          reply->text));
      } else {
        published_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (answered > 0) {
        const std::uint64_t last_done = batch[answered - 1].sequence;
        while (!queue_.empty() && queue_.front().sequence <= last_done) queue_.pop_front();
      }
      if (refused) peers_missed_changes_ = true;
    }
    if (!failure.is_ok()) return failure;
    if (refused) return Status::ok();  // the marker goes out with the next change, not in a loop now
  }
}

Status RedisRelay::read_subscription() {
  for (;;) {
    auto reply = link_->subscriber.buffered_reply();
    if (!reply) return reply.status();
    if (!reply->has_value()) return Status::ok();
    const RedisReply& r = **reply;
    if (r.is_array() && r.elements.size() == 3 && r.elements[0].text == "message") {
      handle_message(r.elements[2].text, std::nullopt);
    }
    // Anything else is a subscription confirmation or a heartbeat answer.
  }
}

void RedisRelay::handle_message(const std::string& payload, std::optional<StreamId> stream_entry) {
  auto parsed = parse_change_message(payload);
  std::optional<StreamId> id = stream_entry;
  if (parsed && !id) {
    id = StreamId::parse(parsed->stream_id);
    if (!id) parsed = Status::invalid_argument("malformed change message: field 'stream_id' is missing or bad");
  }
  if (id) {
    if (cursor_ && *id <= *cursor_) return;  // seen already: the replay and the channel overlap
    cursor_ = *id;
  }
  if (!parsed) {
    malformed_.fetch_add(1, std::memory_order_relaxed);
    log(LogLevel::kWarning, fmt::format("skipped a change message from {} ({}): {}",
                                        stream_entry ? "the change log" : "the channel", parsed.status().message(),
                                        preview(payload)));
    return;
  }
  if (parsed->change.origin == instance_id_) return;
  deliver(*parsed, stream_entry.has_value());
}

void RedisRelay::deliver(const ChangeMessage& message, bool replayed) {
  try {
    if (message.origin_dropped_changes) {
      gaps_.fetch_add(1, std::memory_order_relaxed);
      if (callbacks_.on_gap) {
        callbacks_.on_gap(fmt::format("instance {} dropped changes it could not send", message.change.origin));
      }
      return;
    }
    // Counted first, so whoever sees the change applied also sees it counted.
    (replayed ? replayed_ : received_).fetch_add(1, std::memory_order_relaxed);
    if (callbacks_.on_change) callbacks_.on_change(message.change);
  } catch (const std::exception& e) {
    log(LogLevel::kError, fmt::format("applying a change from instance {} failed: {}", message.change.origin, e.what()));
  }
}

}  // namespace rapidqa::cache
