// rapidqa-server: the engine behind HTTP/1.1, HTTP/2 and WebSocket.
//
//   rapidqa-server --plain --port 8080                  # the bundled FAQ on loopback
//   rapidqa-server --tls-cert c.pem --tls-key k.pem --address 0.0.0.0 --token-file token
//   rapidqa-server --store sqlite:faq.db --plain
//
// A thin layer over the public API: ServerApi turns requests into engine
// calls, HttpTransport carries them. SIGTERM drains, SIGHUP reloads the
// knowledge file (without a store) and the TLS certificate.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include <signal.h>
#include <unistd.h>

#include <rapidqa/qa_engine.h>
#include <rapidqa/version.h>

#include "encoder_flags.h"

#include "grpc_transport.h"
#include "http_transport.h"
#include "server_api.h"
#include "tool_support.h"

#ifndef RAPIDQA_DEFAULT_KB
#define RAPIDQA_DEFAULT_KB "examples/data/faq.jsonl"
#endif

namespace {

int g_signal_pipe[2] = {-1, -1};

extern "C" void forward_signal(int signal) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  (void)!write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

using rapidqa::server::ServerApiOptions;
using rapidqa::server::TransportOptions;

struct ServerOptions {
  std::string kb = RAPIDQA_DEFAULT_KB;
  bool kb_given = false;
  std::string store;
  rapidqa::tools::EncoderFlags encoder;
  rapidqa::tools::GeneratorFlags generator;
  std::string token_file;
  ServerApiOptions api;
  TransportOptions transport;
  int grpc_port = -1;
  std::size_t max_stream_in_flight = 32;
  std::size_t workers = 0;  // 0: 2, or 64 when the engine waits on another engine (see print_usage)
  std::size_t max_pending = 1024;
  std::string access_log;
  // Answer quality (docs/answer-quality.md): engine defaults a request may
  // override, and the word list retrieval segments CJK text with.
  float min_answer_confidence = 0;
  std::optional<float> semantic_target_error_rate;
  std::string word_dictionary;
};

void print_usage(std::FILE* to) {
  std::fprintf(
      to,
      "usage: rapidqa-server (--plain | --tls-cert FILE --tls-key FILE) [--h2-port N] [--grpc-port N] [options]\n"
      "Serves rapidqa over HTTP/1.1 and WebSocket (--port), HTTP/2 (--h2-port: h2c, or h2 over TLS), WebSocket\n"
      "(/v1/ws) and gRPC (--grpc-port). HTTP routes: POST /v1/ask, /v1/ask:batch; GET|PUT|DELETE\n"
      "/v1/entries/{id}, POST /v1/entries:import;\n"
      "POST /v1/cache:invalidate|correct|delete; GET /metrics, /healthz, /readyz; POST /v1/embeddings (OpenAI);\n"
      "KServe v2 under /v2 (POST /v2/models/NAME/infer). SIGTERM drains, SIGHUP reloads.\n"
      "\n"
      "Knowledge and model:\n"
      "  --kb FILE                knowledge base, JSON lines (default: the bundled FAQ); reloaded on SIGHUP\n"
      "                           when there is no store\n"
      "  --store URI              answer from a knowledge store (sqlite:PATH or postgresql://...); with --kb\n"
      "                           the file is imported into it first\n"
      "%s%s"
      "  --model-name NAME        the model name /v1/embeddings and /v2/models serve (default rapidqa-encoder)\n"
      "Answers (docs/answer-quality.md):\n"
      "  --min-answer-confidence X  answer only at a calibrated confidence of X or more, in [0, 1]\n"
      "                           (default 0: off; a request's min_answer_confidence overrides it)\n"
      "  --semantic-target-error-rate X\n"
      "                           semantic-cache hits decided by thresholds learned to keep wrong hits at\n"
      "                           or under X, in (0, 0.5] (default: the fixed threshold)\n"
      "  --word-dictionary FILE   word list (\"word count [tag]\" lines, e.g. python3-jieba's dict.txt) to\n"
      "                           segment Chinese text into words for retrieval (default: none)\n"
      "Listening:\n"
      "  --address ADDR           interface to listen on (default 127.0.0.1; 0.0.0.0 for every one)\n"
      "  --port N                 port (default 8080; 0 picks a free one, printed on stderr)\n"
      "  --h2-port N              also serve HTTP/2 on this port: h2c with prior knowledge with --plain,\n"
      "                           h2 (ALPN) with TLS (0 picks a free one; default: no HTTP/2 listener)\n"
      "  --grpc-port N            also serve gRPC (rapidqa.v1.QA, KServe v2 inference, health, reflection)\n"
      "                           on this port (0 picks a free one; default: no gRPC); TLS as for HTTP\n"
      "  --tls-cert FILE          PEM certificate: serve TLS on every port\n"
      "  --tls-key FILE           its PEM private key\n"
      "  --plain                  serve without TLS (must be asked for)\n"
      "Access:\n"
      "  --token-file FILE        bearer token for administration (entries, cache); else the environment\n"
      "                           variable RAPIDQA_SERVER_TOKEN; without either, administration is refused\n"
      "  --protect-ask            asking, embeddings and inference need the token too\n"
      "Limits:\n"
      "  --max-body-bytes N       largest request body (default 1048576): larger gets 413\n"
      "  --max-header-bytes N     all headers of a request together (default 8192, 1024 to 65535)\n"
      "  --max-connections N      open connections (default 1024): more get 503 and are closed\n"
      "  --max-streams N          HTTP/2 streams at once per connection (default 128)\n"
      "  --max-ws-message-bytes N largest WebSocket message (default 65536): larger closes with 1009\n"
      "  --max-ws-in-flight N     unanswered questions per WebSocket (default 32): more are refused\n"
      "  --max-stream-in-flight N gRPC AskStream questions read ahead of their answers (default 32)\n"
      "  --max-batch N            questions or texts in one request (default 256)\n"
      "  --client-timeout-s N     a client silent for this long is cut off (default 10)\n"
      "  --rate-limit QPS         questions per second per tenant (default 0: none): more get 429\n"
      "  --rate-burst N           questions a tenant may ask at once (default: one second's worth)\n"
      "  --workers N              threads that call the engine (default 2; 64 with --remote-encoder or\n"
      "                           --generator, whose asks wait on that engine and share its batches)\n"
      "  --max-pending N          requests waiting for a worker (default 1024): more get 503 + Retry-After\n"
      "  --drain-grace-s N        on SIGTERM, how long requests in flight may take (default 10)\n"
      "Other:\n"
      "  --access-log DEST        JSON lines per request: a file, or - for stdout (default: none)\n"
      "  --version                print the version and exit\n"
      "  --help                   this text\n"
      "\n"
      "Request headers: Authorization: Bearer TOKEN; x-request-id (echoed, logged); x-request-timeout-ms\n"
      "(the request's deadline, passed to the engine, which degrades rather than miss it).\n", rapidqa::tools::EncoderFlags::kUsage,
      rapidqa::tools::GeneratorFlags::kUsage);
}

bool parse_count(const char* text, unsigned long long max, unsigned long long& out) {
  if (!text || !*text || *text == '-') return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(text, &end, 10);
  return errno == 0 && end && *end == '\0' && out <= max;
}

// Returns 0 to go on, -1 to exit 0 (help, version), or an exit code.
int parse_args(int argc, char** argv, ServerOptions& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "rapidqa-server: %s needs a value\n", arg.c_str());
        return nullptr;
      }
      return argv[++i];
    };
    auto count = [&](unsigned long long min, unsigned long long max, auto& field) -> bool {
      const char* v = value();
      unsigned long long n = 0;
      if (!v) return false;
      if (!parse_count(v, max, n) || n < min) {
        std::fprintf(stderr, "rapidqa-server: %s must be a whole number from %llu to %llu, not '%s'\n", arg.c_str(),
                     min, max, v);
        return false;
      }
      field = static_cast<std::remove_reference_t<decltype(field)>>(n);
      return true;
    };
    auto seconds = [&](unsigned long long min, std::chrono::seconds& field) -> bool {
      unsigned long long n = 0;
      if (!count(min, 86400, n)) return false;
      field = std::chrono::seconds(n);
      return true;
    };
    auto text = [&](std::string& field) -> bool {
      const char* v = value();
      if (!v) return false;
      field = v;
      return true;
    };
    // A number in [low, high] (or (low, high] without low_included).
    auto fraction = [&](float low, bool low_included, float high, float& field) -> bool {
      const char* v = value();
      if (!v) return false;
      char* end = nullptr;
      const float x = std::strtof(v, &end);
      if (!*v || *end != '\0' || !(low_included ? x >= low : x > low) || !(x <= high)) {
        std::fprintf(stderr, "rapidqa-server: %s must be a number in %c%g, %g], not '%s'\n", arg.c_str(),
                     low_included ? '[' : '(', low, high, v);
        return false;
      }
      field = x;
      return true;
    };
    bool ok = true;
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      return -1;
    } else if (arg == "--version") {
      std::printf("rapidqa-server %s\n", RAPIDQA_VERSION_STRING);
      return -1;
    } else if (arg == "--kb") {
      ok = text(o.kb);
      o.kb_given = true;
    } else if (arg == "--store") {
      ok = text(o.store);
    } else if (const int taken = o.encoder.parse("rapidqa-server", argc, argv, i); taken != 0) {
      ok = taken > 0;
    } else if (const int taken = o.generator.parse("rapidqa-server", argc, argv, i); taken != 0) {
      ok = taken > 0;
    } else if (arg == "--model-name") {
      ok = text(o.api.model_name);
      if (ok && (o.api.model_name.empty() || o.api.model_name.find('/') != std::string::npos)) {
        std::fprintf(stderr, "rapidqa-server: --model-name must be non-empty and without '/'\n");
        ok = false;
      }
    } else if (arg == "--address") {
      ok = text(o.transport.address);
    } else if (arg == "--port") {
      ok = count(0, 65535, o.transport.port);
    } else if (arg == "--h2-port") {
      ok = count(0, 65535, o.transport.h2_port);
    } else if (arg == "--grpc-port") {
      ok = count(0, 65535, o.grpc_port);
    } else if (arg == "--max-stream-in-flight") {
      ok = count(1, 100000, o.max_stream_in_flight);
    } else if (arg == "--tls-cert") {
      ok = text(o.transport.tls_certificate);
    } else if (arg == "--tls-key") {
      ok = text(o.transport.tls_key);
    } else if (arg == "--plain") {
      o.transport.plain = true;
    } else if (arg == "--token-file") {
      ok = text(o.token_file);
    } else if (arg == "--protect-ask") {
      o.api.protect_ask = true;
    } else if (arg == "--max-body-bytes") {
      ok = count(1, 1ULL << 32, o.transport.max_body_bytes);
    } else if (arg == "--max-header-bytes") {
      ok = count(1024, 65535, o.transport.max_header_bytes);
    } else if (arg == "--max-connections") {
      ok = count(1, 1000000, o.transport.max_connections);
    } else if (arg == "--max-streams") {
      ok = count(1, 100000, o.transport.max_streams_per_connection);
    } else if (arg == "--max-ws-message-bytes") {
      ok = count(64, 1ULL << 26, o.transport.max_ws_message_bytes);
    } else if (arg == "--max-ws-in-flight") {
      ok = count(1, 100000, o.transport.max_ws_in_flight);
    } else if (arg == "--max-batch") {
      ok = count(1, 100000, o.api.max_batch);
    } else if (arg == "--client-timeout-s") {
      ok = seconds(1, o.transport.client_timeout);
    } else if (arg == "--drain-grace-s") {
      ok = seconds(0, o.transport.drain_grace);
    } else if (arg == "--rate-limit") {
      ok = count(0, 10000000, o.api.rate_limit.questions_per_second);
    } else if (arg == "--rate-burst") {
      ok = count(1, 10000000, o.api.rate_limit.burst);
    } else if (arg == "--workers") {
      ok = count(1, 1024, o.workers);
    } else if (arg == "--max-pending") {
      ok = count(1, 10000000, o.max_pending);
    } else if (arg == "--access-log") {
      ok = text(o.access_log);
    } else if (arg == "--min-answer-confidence") {
      ok = fraction(0.0f, true, 1.0f, o.min_answer_confidence);
    } else if (arg == "--semantic-target-error-rate") {
      float rate = 0;
      ok = fraction(0.0f, false, 0.5f, rate);
      if (ok) o.semantic_target_error_rate = rate;
    } else if (arg == "--word-dictionary") {
      ok = text(o.word_dictionary);
    } else {
      std::fprintf(stderr, "rapidqa-server: unknown option '%s' (see --help)\n", arg.c_str());
      return 2;
    }
    if (!ok) return 2;
  }
  return 0;
}

// The token from --token-file or RAPIDQA_SERVER_TOKEN, without a trailing
// newline. An empty or unreadable file is an error, not "no token".
bool read_token(const ServerOptions& o, std::string& token) {
  if (!o.token_file.empty()) {
    std::ifstream in(o.token_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "rapidqa-server: cannot read --token-file %s\n", o.token_file.c_str());
      return false;
    }
    token.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else if (const char* env = std::getenv("RAPIDQA_SERVER_TOKEN")) {
    token = env;
  } else {
    return true;
  }
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.size() < 16) {
    std::fprintf(stderr, "rapidqa-server: the token must be at least 16 characters\n");
    return false;
  }
  return true;
}

}  // namespace

int tool_main(int argc, char** argv) {
  ServerOptions options;
  if (const int rc = parse_args(argc, argv, options); rc != 0) return rc < 0 ? 0 : rc;
  if (!read_token(options, options.api.admin_token)) return 2;

  // Signals become bytes on a pipe that one thread reads: a handler may
  // run on any thread (libraries start threads of their own before main,
  // so blocking the signals here would not cover them), and writing to a
  // pipe is all a handler may safely do.
  if (pipe(g_signal_pipe) != 0) {
    std::fprintf(stderr, "rapidqa-server: cannot create the signal pipe\n");
    return 1;
  }
  struct sigaction action {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) sigaction(signal, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  rapidqa::EngineOptions engine_options;
  if (const int rc = options.encoder.make("rapidqa-server", engine_options); rc != 0) return rc;
  if (const int rc =
          options.generator.make("rapidqa-server", engine_options.generator, engine_options.generator_sources);
      rc != 0) {
    return rc;
  }
  engine_options.knowledge_store = options.store;
  engine_options.min_answer_confidence = options.min_answer_confidence;
  engine_options.semantic_cache.target_error_rate = options.semantic_target_error_rate;
  engine_options.retrieval.word_dictionary = options.word_dictionary;
  auto created = rapidqa::QAEngine::create(std::move(engine_options));
  if (!created) {
    std::fprintf(stderr, "rapidqa-server: %s\n", created.status().to_string().c_str());
    return 1;
  }
  rapidqa::QAEngine& engine = **created;
  rapidqa::server::ServerApi api(engine, options.api);
  rapidqa::server::AccessLog access_log;
  if (const rapidqa::Status s = access_log.open(options.access_log); !s.is_ok()) {
    std::fprintf(stderr, "rapidqa-server: %s\n", s.to_string().c_str());
    return 2;
  }
  // An ask that waits on another engine holds its worker meanwhile: with
  // two, two asks would share a remote encoder's batch, and two
  // generations would hold every other question back.
  const bool waits_on_other_engine =
      !options.encoder.remote.endpoints.empty() || !options.generator.options.endpoints.empty();
  const std::size_t worker_threads = options.workers != 0 ? options.workers : waits_on_other_engine ? 64 : 2;
  rapidqa::server::RequestWorkers workers(worker_threads, options.max_pending);
  rapidqa::server::HttpTransport transport(api, workers, access_log, options.transport);
  if (const rapidqa::Status s = transport.start(); !s.is_ok()) {
    std::fprintf(stderr, "rapidqa-server: %s\n", s.to_string().c_str());
    return 2;
  }
  rapidqa::server::GrpcOptions grpc_options;
  grpc_options.address = options.transport.address;
  grpc_options.port = options.grpc_port;
  grpc_options.tls_certificate = options.transport.tls_certificate;
  grpc_options.tls_key = options.transport.tls_key;
  grpc_options.max_message_bytes = options.transport.max_body_bytes;
  grpc_options.max_streams_per_connection = options.transport.max_streams_per_connection;
  grpc_options.max_stream_in_flight = options.max_stream_in_flight;
  rapidqa::server::GrpcTransport grpc(api, workers, access_log, grpc_options);
  if (const rapidqa::Status s = grpc.start(); !s.is_ok()) {
    std::fprintf(stderr, "rapidqa-server: %s\n", s.to_string().c_str());
    return 2;
  }
  const bool tls = !options.transport.tls_certificate.empty();
  std::fprintf(stderr, "rapidqa-server: listening on %s://%s:%d (HTTP/1.1, WebSocket at /v1/ws)\n",
               tls ? "https" : "http", options.transport.address.c_str(), transport.port());
  if (transport.h2_port() >= 0) {
    std::fprintf(stderr, "rapidqa-server: listening on %s://%s:%d (HTTP/2: %s)\n", tls ? "https" : "http",
                 options.transport.address.c_str(), transport.h2_port(), tls ? "h2 by ALPN" : "h2c, prior knowledge");
  }
  if (grpc.port() > 0) {
    std::fprintf(stderr, "rapidqa-server: listening on %s:%d (gRPC%s)\n", options.transport.address.c_str(),
                 grpc.port(), tls ? " over TLS" : "");
  }
  auto mark_ready = [&api, &grpc] {
    api.set_ready(true);
    grpc.set_ready(true);
  };

  const bool load_file = options.store.empty() || options.kb_given;
  auto load = [&engine, &mark_ready, &options](bool first) {
    auto loaded = engine.load_knowledge(options.kb);
    if (!loaded) {
      std::fprintf(stderr, "rapidqa-server: %s %s: %s\n", first ? "loading" : "reloading", options.kb.c_str(),
                   loaded.status().to_string().c_str());
      if (first) std::fprintf(stderr, "rapidqa-server: not ready: fix the file and send SIGHUP\n");
      return;
    }
    mark_ready();
    std::fprintf(stderr, "rapidqa-server: ready: %zu entries from %s%s\n", loaded->entries, options.kb.c_str(),
                 loaded->skipped.empty() ? "" : " (bad lines skipped)");
  };
  std::thread loader;
  if (load_file) {
    loader = std::thread(load, true);
  } else {
    mark_ready();
    std::fprintf(stderr, "rapidqa-server: ready: %zu entries from the store\n", engine.entry_count());
  }
  transport.reload_knowledge = [&] {
    if (options.store.empty()) {
      load(false);
    } else {
      std::fprintf(stderr, "rapidqa-server: reload: the knowledge lives in the store; import with rapidqa-kb\n");
    }
  };

  std::thread signal_thread([&] {
    for (;;) {
      unsigned char signal = 0;
      const ssize_t got = read(g_signal_pipe[0], &signal, 1);
      if (got < 0 && errno == EINTR) continue;
      if (got != 1 || signal == 0) return;  // 0: the loop ended on its own
      if (signal == SIGHUP) {
        std::fprintf(stderr, "rapidqa-server: SIGHUP: reloading\n");
        transport.request_reload();
        continue;
      }
      std::fprintf(stderr, "rapidqa-server: %s: draining\n", signal == SIGTERM ? "SIGTERM" : "SIGINT");
      transport.request_drain();
      // gRPC drains beside HTTP: new calls refused, those in flight given
      // the same grace period.
      grpc.shutdown(std::chrono::system_clock::now() + options.transport.drain_grace);
      return;
    }
  });

  transport.run();
  const unsigned char stop = 0;
  (void)!write(g_signal_pipe[1], &stop, 1);  // ends the signal thread if no signal did
  signal_thread.join();
  if (loader.joinable()) loader.join();
  grpc.shutdown(std::chrono::system_clock::now());
  workers.stop();  // before the transports go: a finishing job wakes their loops
  std::fprintf(stderr, "rapidqa-server: stopped\n");
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-server", [&] { return tool_main(argc, argv); });
}
