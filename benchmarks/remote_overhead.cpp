// rapidqa-remote-bench: what a remote encoder costs against the same model
// in this process, with rapidqa-server as the host on loopback (started by
// benchmarks/run_remote_overhead.sh). Two measures, interleaved round by
// round:
//   encode   one thread, sequential calls of 1, 16 and 64 texts: p50/p99 of
//            the in-process encoder and of the remote one (HTTP/1.1
//            keep-alive), and the p50 the network path adds;
//   engine   N client threads asking without the caches (so every ask
//            encodes), closed loop: answers/s and p50/p99 with the engine's
//            DynamicBatcher gathering asks into one HTTP request, and with
//            one request per ask;
//   encoder  N client threads encoding one text each through the remote
//            encoder alone, closed loop: requests/s and p50/p99 through a
//            DynamicBatcher set as the engine's (one HTTP request per batch),
//            and with one HTTP request per text.
// The host must serve the same knowledge base (its encoder learns IDF from
// it), so both sides make the same vectors.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <rapidqa/dynamic_batcher.h>
#include <rapidqa/qa_engine.h>
#include <rapidqa/remote_encoder.h>
#include <rapidqa/text_normalizer.h>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string endpoint;
  std::string model = "rapidqa-encoder";
  std::string kb = "examples/data/faq.jsonl";
  int rounds = 2;
  int calls = 2000;
  double seconds = 5;
  std::vector<int> clients = {8, 32, 128};
  std::vector<int> sizes = {1, 16, 64};
  rapidqa::RemoteProtocol protocol = rapidqa::RemoteProtocol::kOpenAIEmbeddings;
  bool http2 = false;
  int batch_workers = 4;
  int batch_delay_us = 2000;
  int batch_size = 16;
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-remote-bench --endpoint URL [--model NAME] [--kb FILE] [--rounds N] [--calls N]\n"
               "                            [--seconds S] [--clients A,B] [--sizes A,B] [--protocol NAME] [--http2]\n"
               "Measures a remote encoder (rapidqa-server on loopback as the host) against the same encoder in\n"
               "this process. Run by benchmarks/run_remote_overhead.sh, which starts the host.\n"
               "  --endpoint URL  the host's base URL (required)\n"
               "  --model NAME    the model name the host serves (rapidqa-encoder)\n"
               "  --kb FILE       the knowledge base the host serves too (examples/data/faq.jsonl)\n"
               "  --rounds N      interleaved rounds (2)\n"
               "  --calls N       sequential encode calls per size and side (2000)\n"
               "  --seconds S     length of each engine run (5)\n"
               "  --clients A,B   asking threads in the engine runs, one run per count (8,32,128)\n"
               "  --sizes A,B     texts per encode call, one measurement per size (1,16,64)\n"
               "  --protocol NAME openai (default), kserve (KServe v2 over HTTP) or kserve-grpc (the host's gRPC\n"
               "                  port as --endpoint)\n"
               "  --http2         HTTP/2 (h2c, prior knowledge: the host's --h2-port as --endpoint)\n"
               "  --batch-workers N  batches the engine's batcher sends at once (4: the work is the host's)\n"
               "  --batch-delay-us N longest wait for a fuller batch (2000, the engine's default)\n"
               "  --batch-size N     most texts in one request (16, the engine's default)\n");
}

// A comma-separated list of counts, each clamped to [1, most].
std::vector<int> counts(const std::string& list, int most) {
  std::vector<int> out;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    out.push_back(std::clamp(std::atoi(list.substr(at, comma - at).c_str()), 1, most));
    at = comma + 1;
  }
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

std::vector<std::string> questions_of(const std::string& kb) {
  std::vector<std::string> out;
  std::ifstream in(kb);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    if (j.contains("question") && j["question"].is_string()) out.push_back(j["question"]);
    if (j.contains("alternates") && j["alternates"].is_array()) {
      for (const auto& a : j["alternates"]) {
        if (a.is_string()) out.push_back(a);
      }
    }
  }
  return out;
}

// Milliseconds of each of `calls` sequential encodes of `batch` texts.
std::vector<double> time_encodes(const rapidqa::Encoder& encoder, const std::vector<std::string>& texts,
                                 std::size_t batch, int calls) {
  std::vector<double> ms;
  std::vector<float> out;
  std::vector<std::string> chunk;
  for (int c = 0; c < calls; ++c) {
    chunk.clear();
    for (std::size_t i = 0; i < batch; ++i) chunk.push_back(texts[(c * batch + i) % texts.size()]);
    const auto start = Clock::now();
    const rapidqa::Status s = encoder.encode(chunk, out);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!s.is_ok()) {
      std::fprintf(stderr, "rapidqa-remote-bench: %s: %s\n", encoder.name().c_str(), s.to_string().c_str());
      std::exit(1);
    }
  }
  return ms;
}

struct LoadRun {
  double per_s = 0, p50 = 0, p99 = 0;
  std::uint64_t failed = 0;  // degraded answers, or failed encodes
};

// `clients` threads calling `one` in a closed loop for `seconds`, each with
// its own walk through the questions; `one` returns false for a degraded
// answer or a failed call.
template <typename OneRequest>
LoadRun drive(const std::vector<std::string>& questions, int clients, double seconds, const OneRequest& one) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(clients));
  std::atomic<std::uint64_t> failed{0};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      std::size_t i = static_cast<std::size_t>(t) * 7;
      while (!stop.load(std::memory_order_relaxed)) {
        const auto begin = Clock::now();
        const bool ok = one(questions[i++ % questions.size()]);
        latencies[static_cast<std::size_t>(t)].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - begin).count());
        if (!ok) failed.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  LoadRun r;
  r.per_s = static_cast<double>(all.size()) / elapsed;
  r.p50 = percentile(all, 0.5);
  r.p99 = percentile(all, 0.99);
  r.failed = failed.load();
  return r;
}

LoadRun drive_engine(rapidqa::QAEngine& engine, const std::vector<std::string>& questions, int clients,
                     double seconds) {
  rapidqa::AskOptions ask;
  ask.use_cache = false;
  return drive(questions, clients, seconds, [&](const std::string& question) {
    auto answer = engine.ask(question, ask);
    return answer && !answer->degraded;
  });
}

// The remote encoder alone, one text per caller: through a DynamicBatcher
// set as the engine sets its own (one HTTP request per batch), or one HTTP
// request per text.
using TextBatcher = rapidqa::DynamicBatcher<std::string, std::vector<float>>;

std::unique_ptr<TextBatcher> text_batcher(std::shared_ptr<rapidqa::Encoder> encoder, const Options& o) {
  rapidqa::DynamicBatcherOptions b = rapidqa::default_encoder_batching();
  b.workers = static_cast<std::size_t>(o.batch_workers);
  b.max_queue_delay = std::chrono::microseconds(o.batch_delay_us);
  b.max_batch_size = static_cast<std::size_t>(o.batch_size);
  auto batcher = TextBatcher::create(b, [encoder](std::vector<std::string>& texts, std::size_t) {
    std::vector<float> flat;
    const rapidqa::Status s = encoder->encode(texts, flat);
    if (!s.is_ok()) throw std::runtime_error(s.message());
    const std::size_t d = encoder->dimension();
    std::vector<std::vector<float>> rows(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) rows[i].assign(flat.begin() + i * d, flat.begin() + (i + 1) * d);
    return rows;
  });
  if (!batcher) {
    std::fprintf(stderr, "rapidqa-remote-bench: %s\n", batcher.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(batcher).value();
}

LoadRun drive_encoder(const rapidqa::Encoder& encoder, TextBatcher* batcher, const std::vector<std::string>& texts,
                      int clients, double seconds) {
  if (batcher) {
    return drive(texts, clients, seconds,
                 [&](const std::string& text) { return batcher->submit(text).get().ok(); });
  }
  return drive(texts, clients, seconds, [&](const std::string& text) {
    thread_local std::vector<std::string> one(1);
    thread_local std::vector<float> out;
    one[0] = text;
    return encoder.encode(one, out).is_ok();
  });
}

std::unique_ptr<rapidqa::QAEngine> engine_with(std::shared_ptr<rapidqa::Encoder> encoder, bool batch,
                                               const std::string& kb, int batch_workers = 1,
                                               int batch_delay_us = 2000, int batch_size = 16) {
  rapidqa::EngineOptions o;
  o.encoder = std::move(encoder);
  o.batch_encoder = batch;
  o.encoder_batching.workers = static_cast<std::size_t>(batch_workers);
  o.encoder_batching.max_queue_delay = std::chrono::microseconds(batch_delay_us);
  o.encoder_batching.max_batch_size = static_cast<std::size_t>(batch_size);
  auto engine = rapidqa::QAEngine::create(o);
  if (!engine || !(*engine)->load_knowledge(kb)) {
    std::fprintf(stderr, "rapidqa-remote-bench: cannot make the engine\n");
    std::exit(1);
  }
  return std::move(engine).value();
}

int run(const Options& o) {
  const std::vector<std::string> questions = questions_of(o.kb);
  if (questions.empty()) {
    std::fprintf(stderr, "rapidqa-remote-bench: no questions in %s\n", o.kb.c_str());
    return 2;
  }
  std::vector<std::string> normalized;
  for (const auto& q : questions) normalized.push_back(rapidqa::normalize_text(q).value());
  auto local = engine_with(nullptr, true, o.kb);
  rapidqa::RemoteEncoderOptions ro;
  ro.endpoints = {o.endpoint};
  ro.model = o.model;
  ro.dimension = local->encoder().dimension();
  ro.protocol = o.protocol;
  if (o.http2) ro.http_version = rapidqa::RemoteHttpVersion::kHttp2;
  auto remote = rapidqa::RemoteEncoder::create(ro);
  if (!remote) {
    std::fprintf(stderr, "rapidqa-remote-bench: %s\n", remote.status().to_string().c_str());
    return 1;
  }
  std::shared_ptr<rapidqa::RemoteEncoder> encoder = std::move(remote).value();
  auto batched = engine_with(encoder, true, o.kb, o.batch_workers, o.batch_delay_us, o.batch_size);
  auto unbatched = engine_with(encoder, false, o.kb);
  auto encoder_batcher = text_batcher(encoder, o);
  // per_s: answers (engine) or encode requests (encoder) a second; failed:
  // degraded answers or failed encodes.
  std::printf("measure,round,side,texts_per_call,clients,per_s,p50_ms,p99_ms,failed\n");
  for (int round = 1; round <= o.rounds; ++round) {
    for (const int size : o.sizes) {
      const auto batch = static_cast<std::size_t>(size);
      const auto in_process = time_encodes(local->encoder(), normalized, batch, o.calls);
      const auto over_http = time_encodes(*encoder, questions, batch, o.calls);
      std::printf("encode,%d,in-process,%zu,1,,%.4f,%.4f,\n", round, batch, percentile(in_process, 0.5),
                  percentile(in_process, 0.99));
      std::printf("encode,%d,remote,%zu,1,,%.4f,%.4f,\n", round, batch, percentile(over_http, 0.5),
                  percentile(over_http, 0.99));
      std::fflush(stdout);
    }
    for (int clients : o.clients) {
      for (const auto& [name, engine] : {std::make_pair("remote-batched", batched.get()),
                                         std::make_pair("remote-one-per-ask", unbatched.get()),
                                         std::make_pair("in-process", local.get())}) {
        const LoadRun r = drive_engine(*engine, questions, clients, o.seconds);
        std::printf("engine,%d,%s,,%d,%.1f,%.4f,%.4f,%llu\n", round, name, clients, r.per_s, r.p50, r.p99,
                    static_cast<unsigned long long>(r.failed));
        std::fflush(stdout);
      }
      for (const auto& [name, batcher] : {std::make_pair("remote-batched", encoder_batcher.get()),
                                          std::make_pair("remote-one-per-call", static_cast<TextBatcher*>(nullptr))}) {
        const LoadRun r = drive_encoder(*encoder, batcher, questions, clients, o.seconds);
        std::printf("encoder,%d,%s,1,%d,%.1f,%.4f,%.4f,%llu\n", round, name, clients, r.per_s, r.p50, r.p99,
                    static_cast<unsigned long long>(r.failed));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    }
    if (arg == "--http2") {
      o.http2 = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "rapidqa-remote-bench: unknown option or missing value: %s\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    const std::string v = argv[++i];
    if (arg == "--endpoint") o.endpoint = v;
    else if (arg == "--model") o.model = v;
    else if (arg == "--kb") o.kb = v;
    else if (arg == "--rounds") o.rounds = std::max(1, std::atoi(v.c_str()));
    else if (arg == "--calls") o.calls = std::max(1, std::atoi(v.c_str()));
    else if (arg == "--seconds") o.seconds = std::max(0.1, std::atof(v.c_str()));
    else if (arg == "--clients") o.clients = counts(v, 4096);
    else if (arg == "--sizes") o.sizes = counts(v, 4096);
    else if (arg == "--protocol") {
      const auto protocol = rapidqa::remote_protocol_from_name(v);
      if (!protocol) {
        std::fprintf(stderr, "rapidqa-remote-bench: unknown protocol %s (openai, kserve, kserve-grpc)\n", v.c_str());
        return 2;
      }
      o.protocol = *protocol;
    }
    else if (arg == "--batch-delay-us") o.batch_delay_us = std::clamp(std::atoi(v.c_str()), 0, 1000000);
    else if (arg == "--batch-size") o.batch_size = std::clamp(std::atoi(v.c_str()), 1, 4096);
    else if (arg == "--batch-workers") o.batch_workers = std::clamp(std::atoi(v.c_str()), 1, 64);
    else {
      std::fprintf(stderr, "rapidqa-remote-bench: unknown option %s\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (o.endpoint.empty()) {
    std::fprintf(stderr, "rapidqa-remote-bench: --endpoint is required\n");
    usage(stderr);
    return 2;
  }
  return run(o);
}
