// rapidqa-load: drives a QAEngine with a model encoder by open-loop Poisson
// arrivals and reports what users would see: p50/p95/p99 latency (from each
// request's scheduled arrival, so a slow server cannot hide queueing in the
// client), throughput, goodput (answers within the deadline), the degraded
// fraction and lost requests (errors or no answer).
//
//   rapidqa-load --model DIR --kb FILE sweep    --qps 50,100,200 [--modes none,fixed,dynamic,tuned]
//   rapidqa-load --model DIR --kb FILE step     --from 100 --to 400 [--mode tuned]
//   rapidqa-load --model DIR --kb FILE overload --qps 600 [--mode tuned]
//
// Modes: none (one request per forward pass), fixed (batches of 16 after a
// 5 ms delay), dynamic (up to 32, dispatched early by the latency model to
// hold half the p99 target), tuned (dynamic's settings as its starting
// point, moved by the AutoTuner: the study asks whether tuning improves on
// where it starts, so it starts where dynamic is). Every ask bypasses the caches, so each one reaches the model.
// Results go to stdout as a table and to --csv FILE; plot them with
// benchmarks/python/plot_load.py.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rapidqa/knowledge_file.h"
#include "rapidqa/qa_engine.h"
#include "rapidqa/transformer_encoder.h"
#include "load_network.h"
#include "tool_support.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

struct Settings {
  std::string command;
  std::string model_dir;
  std::string kb;
  std::vector<std::string> modes{"none", "fixed", "dynamic", "tuned"};
  std::string mode = "tuned";
  std::vector<double> qps{50, 100, 200};
  double from_qps = 0, to_qps = 0;
  double duration_s = 10;
  double step_before_s = 10, step_after_s = 20;
  milliseconds target{100};    // the p99 target, also each request's deadline
  std::string csv;
  std::size_t workers = rapidqa::default_encoder_batching().workers;  // model calls at once
  std::size_t clients = 512;   // concurrent askers: arrivals never wait for a free one at these rates
  std::uint64_t seed = 42;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void usage(std::FILE* to = stderr) {
  std::fprintf(to,
               "usage: rapidqa-load --model DIR --kb FILE COMMAND [options]\n"
               "  sweep    --qps A,B,C [--modes none,fixed,dynamic,tuned]  p99 and goodput per offered rate\n"
               "  step     --from QPS --to QPS [--mode M]   rate steps up after --before s, runs --after s more\n"
               "  overload --qps QPS [--mode M]              sustained overload with deadlines and degradation\n"
               "options: --duration S (10)  --target MS (100: p99 target and deadline)  --csv FILE\n"
               "         --before S (10)  --after S (20)  --clients N (512)  --seed N\n"
               "         --workers N (the engine's default, %zu: encoder batches in their forward passes at once)\n"
               "       rapidqa-load grpc|websocket --target HOST:PORT [options]   load on a running rapidqa-server\n"
               "         (see rapidqa-load grpc --help)\n",
               rapidqa::default_encoder_batching().workers);
}

// A number option's value; anything else (a typo, a unit suffix, a
// negative rate) is a usage error that names the option.
double number_arg(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v) || v < 0) {
    throw std::invalid_argument(option + " needs a non-negative number, not '" + text + "'");
  }
  return v;
}

std::uint64_t whole_arg(const std::string& option, const std::string& text) {
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  try {
    if (digits) return std::stoull(text);
  } catch (const std::out_of_range&) {
  }
  throw std::invalid_argument(option + " needs a whole number, not '" + text + "'");
}

// Throws std::invalid_argument with the problem; --help is handled before.
void parse(int argc, char** argv, Settings& s) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") s.model_dir = value();
    else if (a == "--kb") s.kb = value();
    else if (a == "--modes") s.modes = split(value(), ',');
    else if (a == "--mode") s.mode = value();
    else if (a == "--qps") {
      s.qps.clear();
      for (const auto& q : split(value(), ',')) s.qps.push_back(number_arg(a, q));
    } else if (a == "--from") s.from_qps = number_arg(a, value());
    else if (a == "--to") s.to_qps = number_arg(a, value());
    else if (a == "--duration") s.duration_s = number_arg(a, value());
    else if (a == "--before") s.step_before_s = number_arg(a, value());
    else if (a == "--after") s.step_after_s = number_arg(a, value());
    else if (a == "--target") s.target = milliseconds(whole_arg(a, value()));
    else if (a == "--csv") s.csv = value();
    else if (a == "--clients") s.clients = whole_arg(a, value());
    else if (a == "--workers") s.workers = whole_arg(a, value());
    else if (a == "--seed") s.seed = whole_arg(a, value());
    else if (a.rfind("-", 0) != 0 && s.command.empty()) s.command = a;
    else throw std::invalid_argument("unknown option '" + a + "'");
  }
  if (s.model_dir.empty()) throw std::invalid_argument("--model DIR is required");
  if (s.kb.empty()) throw std::invalid_argument("--kb FILE is required");
  if (s.command.empty()) throw std::invalid_argument("a COMMAND is required (sweep, step or overload)");
}

// One mode's engine: the encoder is shared, the batcher and tuner are new.
rapidqa::EngineOptions options_for(const std::string& mode, const Settings& s,
                                   std::shared_ptr<rapidqa::Encoder> encoder, bool degrade) {
  rapidqa::EngineOptions o;
  o.encoder = std::move(encoder);
  o.enable_result_cache = o.enable_knowledge_cache = o.enable_semantic_cache = false;
  o.rebuild_workers = 0;
  o.degradation.enabled = degrade;
  o.degradation.default_timeout = degrade ? s.target : milliseconds(0);
  auto& b = o.encoder_batching;
  b.queue_capacity = 4096;
  b.workers = s.workers;
  if (mode == "none") {
    b.max_batch_size = 1;
    b.max_queue_delay = microseconds(0);
  } else if (mode == "fixed") {
    b.max_batch_size = 16;
    b.max_queue_delay = microseconds(5000);
  } else if (mode == "dynamic" || mode == "tuned") {
    b.max_batch_size = 32;
    b.max_queue_delay = microseconds(5000);
    b.target_latency = duration_cast<microseconds>(s.target) / 2;
    if (mode == "tuned") {
      o.auto_tune = true;
      auto& t = o.tuner;
      t.interval = milliseconds(500);
      t.hysteresis = 1;
      t.p99_high = duration_cast<microseconds>(s.target);
      t.p99_low = duration_cast<microseconds>(s.target) * 6 / 10;
      // The practice's load thresholds are for its service; here any load
      // counts as high, and capacity is spare while p99 is low.
      t.high_load_qps = 0;
      t.spare_load_qps = 1e12;
      t.max_batch_size = 64;
      t.max_step = 8;
      t.max_queue_delay = microseconds(10000);
    }
  } else {
    throw std::invalid_argument("unknown mode '" + mode + "' (none, fixed, dynamic, tuned)");
  }
  return o;
}

struct Outcome {
  double scheduled_s = 0;     // arrival time from the run's start
  double latency_ms = -1;     // from the scheduled arrival to the answer; -1: lost
  bool degraded = false;
};

// Open-loop Poisson arrivals at rate(t) for `seconds`; returns every
// request's outcome. Client threads take arrivals in order and sleep until
// each one's scheduled time, so the rate does not depend on the server.
std::vector<Outcome> drive(rapidqa::QAEngine& engine, const std::vector<std::string>& questions,
                           const std::function<double(double)>& rate, double seconds, const Settings& s,
                           std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> arrivals;
  for (double t = 0;;) {
    const double r = std::max(1e-6, rate(t));
    t += std::exponential_distribution<double>(r)(rng);
    if (t >= seconds) break;
    arrivals.push_back(t);
  }
  std::vector<Outcome> out(arrivals.size());
  std::atomic<std::size_t> next{0};
  const auto start = Clock::now() + milliseconds(20);
  std::vector<std::thread> clients;
  const std::size_t n_clients = std::min<std::size_t>(s.clients, std::max<std::size_t>(1, arrivals.size()));
  for (std::size_t c = 0; c < n_clients; ++c) {
    clients.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < arrivals.size();) {
        const auto scheduled = start + duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i]));
        std::this_thread::sleep_until(scheduled);
        rapidqa::AskOptions ask;
        ask.use_cache = false;
        auto answer = engine.ask(questions[i % questions.size()], ask);
        out[i].scheduled_s = arrivals[i];
        if (answer.is_ok()) {
          out[i].latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - scheduled).count();
          out[i].degraded = answer->degraded;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  return out;
}

struct Summary {
  std::size_t sent = 0, lost = 0, degraded = 0, within_deadline = 0, within_deadline_plus_10 = 0;
  double p50 = 0, p95 = 0, p99 = 0, max = 0, throughput = 0, goodput = 0;
};

Summary summarize(const std::vector<Outcome>& outcomes, double seconds, milliseconds deadline, double from_s = -1,
                  double to_s = 1e18) {
  Summary s;
  std::vector<double> latencies;
  const double limit = static_cast<double>(deadline.count());
  for (const auto& o : outcomes) {
    if (o.scheduled_s < from_s || o.scheduled_s >= to_s) continue;
    ++s.sent;
    if (o.latency_ms < 0) {
      ++s.lost;
      continue;
    }
    latencies.push_back(o.latency_ms);
    if (o.degraded) ++s.degraded;
    if (o.latency_ms <= limit) ++s.within_deadline;
    if (o.latency_ms <= limit * 1.1) ++s.within_deadline_plus_10;
  }
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double q) {
    if (latencies.empty()) return 0.0;
    return latencies[std::min(latencies.size() - 1, static_cast<std::size_t>(std::ceil(q * latencies.size())) - 1)];
  };
  s.p50 = pct(0.50);
  s.p95 = pct(0.95);
  s.p99 = pct(0.99);
  s.max = latencies.empty() ? 0 : latencies.back();
  s.throughput = static_cast<double>(latencies.size()) / seconds;
  s.goodput = static_cast<double>(s.within_deadline) / seconds;
  return s;
}

std::unique_ptr<rapidqa::QAEngine> make_engine(const rapidqa::EngineOptions& options,
                                               const std::vector<rapidqa::KnowledgeEntry>& entries) {
  auto engine = rapidqa::QAEngine::create(options);
  if (!engine) throw std::runtime_error(engine.status().message());
  auto loaded = (*engine)->load_entries(entries);
  if (!loaded) throw std::runtime_error(loaded.status().message());
  return std::move(engine).value();
}

// A few seconds at a moderate rate, so the batcher's latency model (and the
// CPU's clocks and caches) have settled before anything is measured.
void warm_up(rapidqa::QAEngine& engine, const std::vector<std::string>& questions, const Settings& s) {
  (void)drive(engine, questions, [](double) { return 50.0; }, 2.0, s, s.seed + 99);
}

void print_row(std::FILE* to, const std::string& mode, double qps, const Summary& r, std::size_t batch_limit) {
  std::fprintf(to, "%-8s %8.0f %8zu %8.1f %8.1f %8.1f %9.1f %9.1f %8.3f %6zu %6zu\n", mode.c_str(), qps, r.sent, r.p50,
               r.p95, r.p99, r.throughput, r.goodput, r.sent ? static_cast<double>(r.degraded) / r.sent : 0.0, r.lost,
               batch_limit);
  std::fflush(to);
}

const char* kHeader = "mode     offered     sent   p50 ms   p95 ms   p99 ms  answers/s  goodput  degraded   lost  batch\n";

}  // namespace

int tool_main(int argc, char** argv) {
#if RAPIDQA_LOAD_NETWORK
  if (argc > 1 && rapidqa::bench::is_network_command(argv[1])) return rapidqa::bench::network_load_main(argc, argv);
#endif
  Settings s;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      usage(stdout);
      return 0;
    }
  }
  try {
    parse(argc, argv, s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rapidqa-load: %s\n", e.what());
    usage();
    return 2;
  }
  try {
    auto file = rapidqa::read_knowledge_file(s.kb);
    if (!file) throw std::runtime_error(file.status().message());
    std::vector<std::string> questions;
    for (const auto& e : file->entries) {
      questions.push_back(e.question);
      for (const auto& a : e.alternates) questions.push_back(a);
    }
    std::shuffle(questions.begin(), questions.end(), std::mt19937_64(s.seed));
    rapidqa::TransformerEncoderOptions eo;
    eo.model_dir = s.model_dir;
    eo.max_sequence_length = 32;  // the questions: up to 32 tokens
    auto encoder = rapidqa::TransformerEncoder::load(eo);
    if (!encoder) throw std::runtime_error(encoder.status().message());
    std::fprintf(stderr, "rapidqa-load: %s, %zu entries, %zu questions, target p99 and deadline %lld ms\n",
                 (*encoder)->name().c_str(), file->entries.size(), questions.size(),
                 static_cast<long long>(s.target.count()));
    {
      // One forward's time, the yardstick of the study: the encoder alone,
      // one question at a time, over the questions the load will ask.
      std::vector<double> ms;
      std::size_t tokens = 0;
      std::vector<float> vector;
      for (std::size_t i = 0; i < 400; ++i) {
        const std::string& q = questions[i % questions.size()];
        const auto t0 = Clock::now();
        if (auto st = (*encoder)->encode({q}, vector); !st.is_ok()) throw std::runtime_error(st.message());
        if (i >= 100) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (i < 100) tokens += (*encoder)->token_ids({q}).value().front().size();
      }
      std::sort(ms.begin(), ms.end());
      std::printf("one forward at batch 1: median %.2f ms over %zu questions of %.1f tokens on average "
                  "(1 / forward = %.0f questions/s)\n",
                  ms[ms.size() / 2], ms.size(), static_cast<double>(tokens) / 100.0, 1000.0 / ms[ms.size() / 2]);
    }
    std::ofstream csv;
    if (!s.csv.empty()) {
      csv.open(s.csv);
      if (!csv) throw std::runtime_error("cannot write " + s.csv);
    }

    if (s.command == "sweep") {
      if (csv) csv << "mode,offered_qps,sent,p50_ms,p95_ms,p99_ms,throughput,goodput,degraded_fraction,lost,batch_limit\n";
      std::printf("%s", kHeader);
      for (const auto& mode : s.modes) {
        double sustained = 0;
        for (double qps : s.qps) {
          auto engine = make_engine(options_for(mode, s, *encoder, false), file->entries);
          warm_up(*engine, questions, s);
          const auto outcomes = drive(*engine, questions, [qps](double) { return qps; }, s.duration_s, s, s.seed);
          const Summary r = summarize(outcomes, s.duration_s, s.target);
          const std::size_t limit = engine->metrics().batcher.max_batch_size;
          print_row(stdout, mode, qps, r, limit);
          if (csv) {
            csv << mode << ',' << qps << ',' << r.sent << ',' << r.p50 << ',' << r.p95 << ',' << r.p99 << ','
                << r.throughput << ',' << r.goodput << ',' << (r.sent ? double(r.degraded) / r.sent : 0) << ','
                << r.lost << ',' << limit << '\n';
          }
          if (r.p99 <= static_cast<double>(s.target.count()) && r.lost == 0) sustained = std::max(sustained, qps);
        }
        std::printf("%-8s sustains %.0f qps with p99 under %lld ms\n", mode.c_str(), sustained,
                    static_cast<long long>(s.target.count()));
      }
    } else if (s.command == "step") {
      if (s.from_qps <= 0 || s.to_qps <= 0) throw std::invalid_argument("step needs --from and --to");
      auto engine = make_engine(options_for(s.mode, s, *encoder, true), file->entries);
      warm_up(*engine, questions, s);
      const double total = s.step_before_s + s.step_after_s;
      const auto outcomes = drive(*engine, questions,
                                  [&](double t) { return t < s.step_before_s ? s.from_qps : s.to_qps; }, total, s, s.seed);
      if (csv) csv << "second,offered_qps,sent,p50_ms,p99_ms,degraded_fraction\n";
      std::printf("second  offered   sent   p50 ms   p99 ms  degraded\n");
      double recovered_at = -1;
      for (int sec = 0; sec < static_cast<int>(total); ++sec) {
        const Summary r = summarize(outcomes, 1.0, s.target, sec, sec + 1);
        const double offered = sec < s.step_before_s ? s.from_qps : s.to_qps;
        const double degraded = r.sent ? double(r.degraded) / r.sent : 0;
        std::printf("%6d %8.0f %6zu %8.1f %8.1f %9.3f\n", sec, offered, r.sent, r.p50, r.p99, degraded);
        if (csv) csv << sec << ',' << offered << ',' << r.sent << ',' << r.p50 << ',' << r.p99 << ',' << degraded << '\n';
        const bool under = r.p99 <= static_cast<double>(s.target.count());
        if (sec >= s.step_before_s) {
          if (!under) recovered_at = -1;
          else if (recovered_at < 0) recovered_at = sec - s.step_before_s;
        }
      }
      const auto history = engine->tuning().tuner_history();
      std::printf("tuner moves: %zu; batch limit now %zu\n", history.size(), engine->metrics().batcher.max_batch_size);
      for (const auto& m : history) {
        std::printf("  batch %zu -> %zu, delay %lld -> %lld us: %s\n", m.old_batch_size, m.new_batch_size,
                    static_cast<long long>(m.old_queue_delay.count()), static_cast<long long>(m.new_queue_delay.count()),
                    m.reason.c_str());
      }
      if (recovered_at >= 0) {
        std::printf("p99 back under %lld ms %.0f s after the step, and stayed there\n",
                    static_cast<long long>(s.target.count()), recovered_at);
      } else {
        std::printf("p99 did not stay under %lld ms after the step\n", static_cast<long long>(s.target.count()));
      }
    } else if (s.command == "overload") {
      if (s.qps.size() != 1) throw std::invalid_argument("overload needs one --qps");
      auto engine = make_engine(options_for(s.mode, s, *encoder, true), file->entries);
      warm_up(*engine, questions, s);
      const auto outcomes = drive(*engine, questions, [&](double) { return s.qps.front(); }, s.duration_s, s, s.seed);
      const Summary r = summarize(outcomes, s.duration_s, s.target);
      std::printf("%s", kHeader);
      print_row(stdout, s.mode, s.qps.front(), r, engine->metrics().batcher.max_batch_size);
      std::printf("lost %zu of %zu; within the deadline %.4f; within the deadline + 10%% %.4f; max %.1f ms; "
                  "degraded %.3f\n",
                  r.lost, r.sent, r.sent ? double(r.within_deadline) / r.sent : 0,
                  r.sent ? double(r.within_deadline_plus_10) / r.sent : 0, r.max,
                  r.sent ? double(r.degraded) / r.sent : 0);
      if (csv) {
        csv << "mode,offered_qps,sent,lost,within_deadline,within_deadline_plus_10,p50_ms,p99_ms,max_ms,degraded_fraction\n"
            << s.mode << ',' << s.qps.front() << ',' << r.sent << ',' << r.lost << ','
            << (r.sent ? double(r.within_deadline) / r.sent : 0) << ','
            << (r.sent ? double(r.within_deadline_plus_10) / r.sent : 0) << ',' << r.p50 << ',' << r.p99 << ',' << r.max
            << ',' << (r.sent ? double(r.degraded) / r.sent : 0) << '\n';
      }
    } else {
      throw std::invalid_argument("unknown command '" + s.command + "' (sweep, step, overload)");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rapidqa-load: %s\n", e.what());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-load", [&] { return tool_main(argc, argv); });
}
