// rapidqa-load grpc | websocket: load on a running rapidqa-server over gRPC
// (rapidqa.v1.QA/Ask) or over WebSocket sessions (/v1/ws), the two
// protocols h2load cannot drive. Like h2load: a number of connections, a
// number of requests in flight on each, and either as fast as the server
// answers (closed loop) or at a fixed total rate (--rate, open loop: a
// request is sent when due if its connection has room, else counted as not
// sent). Every request's time from send to answer is kept; the summary
// gives requests/s, mean, p50, p99 and max.
//
//   rapidqa-load grpc      --target 127.0.0.1:9090 --connections 4 --in-flight 8 --duration 10
//   rapidqa-load websocket --target 127.0.0.1:8080 --connections 4 --in-flight 8 --rate 4000
#include "load_network.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <libwebsockets.h>

#include "bench_percentile.h"
#include "rapidqa/v1/rapidqa.grpc.pb.h"

namespace rapidqa::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct NetworkSettings {
  std::string protocol;
  std::string host = "127.0.0.1";
  int port = 0;
  std::size_t connections = 4;
  std::size_t in_flight = 8;    // per connection
  double duration_s = 10;
  double warmup_s = 1;
  double rate = 0;              // requests/s over all connections; 0: closed loop
  std::string body = R"({"question": "How do I reset my password?"})";
};

void network_usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-load grpc|websocket --target HOST:PORT [options]\n"
               "  --connections N   connections (default 4)\n"
               "  --in-flight N     requests outstanding per connection (default 8)\n"
               "  --duration S      measured seconds (default 10), after --warmup S (default 1)\n"
               "  --rate QPS        total requests per second, open loop (default: closed loop, as fast as answered)\n"
               "  --body JSON       the ask, as the JSON API takes it (default: a FAQ question, a cache hit)\n");
}

NetworkSettings parse_network(int argc, char** argv) {
  NetworkSettings s;
  s.protocol = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](double min) {
      const std::string v = value();
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(d >= min)) throw std::invalid_argument(a + ": '" + v + "' is not a number >= " + std::to_string(min));
      return d;
    };
    if (a == "--target") {
      const std::string t = value();
      const auto colon = t.rfind(':');
      if (colon == std::string::npos) throw std::invalid_argument("--target must be HOST:PORT");
      s.host = t.substr(0, colon);
      s.port = std::atoi(t.c_str() + colon + 1);
      if (s.port <= 0 || s.port > 65535) throw std::invalid_argument("--target: bad port in '" + t + "'");
    } else if (a == "--connections") {
      s.connections = static_cast<std::size_t>(number(1));
    } else if (a == "--in-flight") {
      s.in_flight = static_cast<std::size_t>(number(1));
    } else if (a == "--duration") {
      s.duration_s = number(0.1);
    } else if (a == "--warmup") {
      s.warmup_s = number(0);
    } else if (a == "--rate") {
      s.rate = number(0);
    } else if (a == "--body") {
      s.body = value();
    } else {
      throw std::invalid_argument("unknown option '" + a + "'");
    }
  }
  if (s.port == 0) throw std::invalid_argument("--target HOST:PORT is required");
  return s;
}

// Latencies of the measured window (after the warm-up), from any thread.
class Recorder {
 public:
  Recorder(Clock::time_point measure_from, Clock::time_point measure_until)
      : from_(measure_from), until_(measure_until) {}
  void answered(Clock::time_point sent, Clock::time_point done, bool ok) {
    if (sent < from_ || sent >= until_) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (ok) {
      latencies_ms_.push_back(std::chrono::duration<double, std::milli>(done - sent).count());
    } else {
      ++errors_;
    }
  }
  void not_sent(Clock::time_point due) {
    if (due < from_ || due >= until_) return;
    std::lock_guard<std::mutex> lock(mu_);
    ++not_sent_;
  }
  void print(const NetworkSettings& s) {
    std::lock_guard<std::mutex> lock(mu_);
    const double seconds = std::chrono::duration<double>(until_ - from_).count();
    double mean = 0, p50 = 0, p99 = 0, max = 0;
    if (!latencies_ms_.empty()) {
      for (double v : latencies_ms_) mean += v;
      mean /= static_cast<double>(latencies_ms_.size());
      max = *std::max_element(latencies_ms_.begin(), latencies_ms_.end());
      p50 = percentile(latencies_ms_, 0.50);
      p99 = percentile(latencies_ms_, 0.99);
    }
    std::printf("protocol,connections,in_flight,offered_qps,answered,errors,not_sent,answers_per_s,mean_ms,p50_ms,p99_ms,max_ms\n");
    std::printf("%s,%zu,%zu,%.0f,%zu,%zu,%zu,%.1f,%.3f,%.3f,%.3f,%.3f\n", s.protocol.c_str(), s.connections,
                s.in_flight, s.rate, latencies_ms_.size(), errors_, not_sent_,
                static_cast<double>(latencies_ms_.size()) / seconds, mean, p50, p99, max);
  }

 private:
  const Clock::time_point from_, until_;
  std::mutex mu_;
  std::vector<double> latencies_ms_;  // guarded by mu_
  std::size_t errors_ = 0;            // guarded by mu_
  std::size_t not_sent_ = 0;          // guarded by mu_
};

// Requests due by `now` at `rate` since `start`, for open-loop pacing.
std::uint64_t due_by(double rate, Clock::time_point start, Clock::time_point now) {
  return static_cast<std::uint64_t>(rate * std::chrono::duration<double>(now - start).count());
}

// gRPC -------------------------------------------------------------------

int run_grpc(const NetworkSettings& s) {
  ::rapidqa::v1::AskRequest request;
  if (!google::protobuf::util::JsonStringToMessage(s.body, &request).ok()) {
    throw std::invalid_argument("--body is not an AskRequest in JSON");
  }
  std::vector<std::unique_ptr<::rapidqa::v1::QA::Stub>> stubs;
  for (std::size_t i = 0; i < s.connections; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one TCP connection per channel
    args.SetInt("rapidqa.load.connection", static_cast<int>(i));
    auto channel = grpc::CreateCustomChannel(s.host + ":" + std::to_string(s.port), grpc::InsecureChannelCredentials(),
                                             args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
      throw std::runtime_error("cannot connect to " + s.host + ":" + std::to_string(s.port));
    }
    stubs.push_back(::rapidqa::v1::QA::NewStub(channel));
  }
  const Clock::time_point start = Clock::now();
  const auto warm = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.warmup_s));
  const auto measured = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.duration_s));
  Recorder recorder(start + warm, start + warm + measured);
  const Clock::time_point stop_at = start + warm + measured;

  std::atomic<std::size_t> outstanding{0};
  std::vector<std::atomic<std::size_t>> per_connection(s.connections);
  std::mutex done_mu;
  std::condition_variable all_done;

  struct Call {
    grpc::ClientContext context;
    ::rapidqa::v1::AskRequest request;
    ::rapidqa::v1::Answer reply;
    Clock::time_point sent;
  };
  std::function<void(std::size_t)> issue = [&](std::size_t connection) {
    auto* call = new Call;
    call->request = request;
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    call->sent = Clock::now();
    ++outstanding;
    ++per_connection[connection];
    stubs[connection]->async()->Ask(&call->context, &call->request, &call->reply,
                                    [&, call, connection](grpc::Status status) {
                                      const Clock::time_point now = Clock::now();
                                      recorder.answered(call->sent, now, status.ok());
                                      delete call;
                                      --per_connection[connection];
                                      if (s.rate == 0 && now < stop_at) issue(connection);
                                      if (--outstanding == 0) {
                                        std::lock_guard<std::mutex> lock(done_mu);
                                        all_done.notify_all();
                                      }
                                    });
  };
  if (s.rate == 0) {
    for (std::size_t c = 0; c < s.connections; ++c) {
      for (std::size_t m = 0; m < s.in_flight; ++m) issue(c);
    }
  } else {
    std::uint64_t sent = 0;
    std::size_t next = 0;
    for (Clock::time_point now = Clock::now(); now < stop_at; now = Clock::now()) {
      for (const std::uint64_t due = due_by(s.rate, start, now); sent < due; ++sent) {
        std::size_t tried = 0;
        while (tried < s.connections && per_connection[next] >= s.in_flight) {
          next = (next + 1) % s.connections;
          ++tried;
        }
        if (tried == s.connections) {
          recorder.not_sent(now);
        } else {
          issue(next);
          next = (next + 1) % s.connections;
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  std::unique_lock<std::mutex> lock(done_mu);
  all_done.wait_for(lock, std::chrono::seconds(60), [&] { return outstanding.load() == 0; });
  recorder.print(s);
  return 0;
}

// WebSocket --------------------------------------------------------------

struct WsLoad {
  const NetworkSettings* settings = nullptr;
  Recorder* recorder = nullptr;
  Clock::time_point start, stop_at;
  struct Connection {
    lws* wsi = nullptr;
    bool open = false;
    std::size_t to_send = 0;           // messages waiting for a writable callback
    std::size_t in_flight = 0;
    std::vector<std::pair<std::uint64_t, Clock::time_point>> sent;  // id, time
    std::string incoming;
  };
  std::vector<Connection> connections;
  std::uint64_t next_id = 0;
  std::uint64_t paced = 0;
  std::size_t round_robin = 0;
  std::size_t failed = 0;
  lws_sorted_usec_list_t pacer{};
  lws_context* context = nullptr;
};

WsLoad* g_ws = nullptr;  // lws's callbacks reach the run through it (one run per process)

std::uint64_t reply_id(const std::string& text) {
  // The server's JSON has "id" as a key of the top object: {"id":N or ,"id":N.
  for (const char* key : {"{\"id\":", ",\"id\":"}) {
    const auto at = text.find(key);
    if (at != std::string::npos) return std::strtoull(text.c_str() + at + std::strlen(key), nullptr, 10);
  }
  return ~0ULL;
}

void pace(lws_sorted_usec_list_t* sul) {
  WsLoad& w = *g_ws;
  const Clock::time_point now = Clock::now();
  if (now < w.stop_at) {
    for (const std::uint64_t due = due_by(w.settings->rate, w.start, now); w.paced < due; ++w.paced) {
      std::size_t tried = 0;
      auto room = [&](const WsLoad::Connection& c) {
        return c.open && c.in_flight + c.to_send < w.settings->in_flight;
      };
      while (tried < w.connections.size() && !room(w.connections[w.round_robin])) {
        w.round_robin = (w.round_robin + 1) % w.connections.size();
        ++tried;
      }
      if (tried == w.connections.size()) {
        w.recorder->not_sent(now);
        continue;
      }
      WsLoad::Connection& c = w.connections[w.round_robin];
      ++c.to_send;
      lws_callback_on_writable(c.wsi);
      w.round_robin = (w.round_robin + 1) % w.connections.size();
    }
  }
  lws_sul_schedule(w.context, 0, sul, pace, 200);  // every 200 µs
}

int ws_callback(lws* wsi, lws_callback_reasons reason, void* user, void* in, std::size_t len) {
  WsLoad& w = *g_ws;
  auto* index = static_cast<std::size_t*>(user);
  switch (reason) {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
      // Nothing is sent until every connection is open and the clock has
      // started (run_websocket): an answer arriving before then would have
      // no recorder to count it.
      w.connections[*index].open = true;
      break;
    case LWS_CALLBACK_CLIENT_WRITEABLE: {
      WsLoad::Connection& c = w.connections[*index];
      if (c.to_send == 0) break;
      const std::uint64_t id = w.next_id++;
      std::string message(LWS_PRE, '\0');
      message += "{\"id\":" + std::to_string(id) + "," + w.settings->body.substr(w.settings->body.find('{') + 1);
      const std::size_t length = message.size() - LWS_PRE;
      c.sent.emplace_back(id, Clock::now());
      if (lws_write(wsi, reinterpret_cast<unsigned char*>(message.data()) + LWS_PRE, length, LWS_WRITE_TEXT) <
          static_cast<int>(length)) {
        return -1;
      }
      --c.to_send;
      ++c.in_flight;
      if (c.to_send > 0) lws_callback_on_writable(wsi);
      break;
    }
    case LWS_CALLBACK_CLIENT_RECEIVE: {
      WsLoad::Connection& c = w.connections[*index];
      c.incoming.append(static_cast<const char*>(in), len);
      if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0) break;
      if (!w.recorder) {  // not asked for by this run (nothing is sent before the clock starts)
        c.incoming.clear();
        break;
      }
      const Clock::time_point now = Clock::now();
      const std::uint64_t id = reply_id(c.incoming);
      const bool ok = c.incoming.find("\"status\":200") != std::string::npos;
      c.incoming.clear();
      auto it = std::find_if(c.sent.begin(), c.sent.end(), [&](const auto& p) { return p.first == id; });
      if (it == c.sent.end()) break;
      w.recorder->answered(it->second, now, ok);
      c.sent.erase(it);
      --c.in_flight;
      if (w.settings->rate == 0 && now < w.stop_at) {
        ++c.to_send;
        lws_callback_on_writable(wsi);
      }
      break;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
    case LWS_CALLBACK_CLIENT_CLOSED:
      if (index && *index < w.connections.size()) w.connections[*index].open = false;
      ++w.failed;
      break;
    default:
      break;
  }
  return 0;
}

int run_websocket(const NetworkSettings& s) {
  WsLoad w;
  g_ws = &w;
  w.settings = &s;
  w.connections.resize(s.connections);
  lws_set_log_level(LLL_ERR, nullptr);
  static lws_protocols protocols[] = {{"rapidqa-load", ws_callback, sizeof(std::size_t), 1 << 16, 0, nullptr, 0},
                                      {nullptr, nullptr, 0, 0, 0, nullptr, 0}};
  lws_context_creation_info info;
  std::memset(&info, 0, sizeof info);
  info.port = CONTEXT_PORT_NO_LISTEN;
  info.protocols = protocols;
  w.context = lws_create_context(&info);
  if (!w.context) throw std::runtime_error("cannot create the WebSocket client context");
  std::vector<std::size_t> indexes(s.connections);
  for (std::size_t i = 0; i < s.connections; ++i) {
    indexes[i] = i;
    lws_client_connect_info c;
    std::memset(&c, 0, sizeof c);
    c.context = w.context;
    c.address = s.host.c_str();
    c.port = s.port;
    c.path = "/v1/ws";
    c.host = s.host.c_str();
    c.origin = s.host.c_str();
    c.protocol = nullptr;
    c.userdata = &indexes[i];
    c.pwsi = &w.connections[i].wsi;
    if (!lws_client_connect_via_info(&c)) throw std::runtime_error("cannot connect to the server");
  }
  // Wait for every connection before the clock starts.
  const Clock::time_point connect_by = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < connect_by &&
         !std::all_of(w.connections.begin(), w.connections.end(), [](const auto& c) { return c.open; })) {
    lws_service(w.context, 0);
  }
  if (!std::all_of(w.connections.begin(), w.connections.end(), [](const auto& c) { return c.open; })) {
    lws_context_destroy(w.context);
    throw std::runtime_error("not every WebSocket connection opened");
  }
  w.start = Clock::now();
  const auto warm = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.warmup_s));
  const auto measured = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.duration_s));
  w.stop_at = w.start + warm + measured;
  Recorder recorder(w.start + warm, w.stop_at);
  w.recorder = &recorder;
  if (s.rate == 0) {
    for (auto& c : w.connections) {
      c.to_send = s.in_flight;
      lws_callback_on_writable(c.wsi);
    }
  } else {
    lws_sul_schedule(w.context, 0, &w.pacer, pace, 1);
  }
  const Clock::time_point give_up = w.stop_at + std::chrono::seconds(30);
  while (Clock::now() < give_up) {
    lws_service(w.context, 0);
    if (Clock::now() >= w.stop_at &&
        std::all_of(w.connections.begin(), w.connections.end(), [](const auto& c) { return c.in_flight == 0; })) {
      break;
    }
  }
  lws_sul_cancel(&w.pacer);
  lws_context_destroy(w.context);
  g_ws = nullptr;
  recorder.print(s);
  return 0;
}

}  // namespace

bool is_network_command(const char* command) {
  return command && (std::strcmp(command, "grpc") == 0 || std::strcmp(command, "websocket") == 0);
}

int network_load_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      network_usage(stdout);
      return 0;
    }
  }
  NetworkSettings s;
  try {
    s = parse_network(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rapidqa-load: %s\n", e.what());
    network_usage(stderr);
    return 2;
  }
  try {
    return s.protocol == "grpc" ? run_grpc(s) : run_websocket(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rapidqa-load: %s\n", e.what());
    return 1;
  }
}

}  // namespace rapidqa::bench
