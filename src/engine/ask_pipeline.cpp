#include "engine/ask_pipeline.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include <fmt/format.h>

#include "engine/options_validation.h"
#include "text/utf8.h"

namespace rapidqa::engine {
namespace {

// Stage timings are latency measurements: always real time, whatever the
// engine's clock (see clock.h).
using SteadyTime = std::chrono::steady_clock;

// Measures one stage after another into an Answer's timings.
class StageTimer {
 public:
  explicit StageTimer(StageTimings& timings) : timings_(timings), start_(SteadyTime::now()) {}
  void finish(Stage stage) {
    const auto now = SteadyTime::now();
    timings_[stage] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - start_);
    start_ = now;
  }

 private:
  StageTimings& timings_;
  SteadyTime::time_point start_;
};

// The longest budget a request may have: a huge one must not overflow the
// clock.
constexpr auto kMaxTimeout = std::chrono::hours(24);

}  // namespace

// What one ask carries from stage to stage.
struct AskPipeline::Request {
  Request(std::string_view question_text, const AskOptions& ask_options, Clock::time_point clock_now)
      : question(question_text), options(ask_options), clock_started(clock_now) {}

  std::string_view question;
  const AskOptions& options;
  const SteadyTime::time_point started = SteadyTime::now();
  const Clock::time_point clock_started;  // the deadline counts from here
  StageTimings timings;
  StageTimer timer{timings};
  CacheKey key;  // the tenant and the normalised question
  TierUse use;
  bool looked_up_knowledge = false, looked_up_semantic = false;
  std::shared_lock<std::shared_mutex> knowledge_lock;
  std::size_t top_k = 0;
  float min_score = 0;
  float min_confidence = 0;
  std::optional<Clock::time_point> deadline;
  std::vector<float> vector;
  bool streamed = false;       // on_token has been given generated text
  // What the semantic tier saw and decided (its answer taken out), for the
  // answer's explanation and the outcome to record after retrieval.
  SemanticLookup semantic;
};

Status AskPipeline::fail(Status why) {
  parts_.metrics->record_error();
  return why;
}

Result<Answer> AskPipeline::finish(Request& request, Answer answer) {
  // A caller that streams gets every answer through on_token: one that was
  // not generated for it arrives whole.
  if (request.options.on_token && !request.streamed && !answer.text.empty()) request.options.on_token(answer.text);
  answer.timings = request.timings;
  answer.timings[Stage::kTotal] =
      std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyTime::now() - request.started);
  parts_.metrics->record_answer(answer, request.use.result, request.looked_up_knowledge, request.looked_up_semantic);
  return answer;
}

Result<Answer> AskPipeline::ask(std::string_view question, const AskOptions& options) {
  const EngineOptions& engine = *parts_.options;
  Request request(question, options, engine.clock->now());
  request.use = parts_.tiers->use_for(options);
  if (Status valid = validate_ask_options(options); !valid.is_ok()) return fail(valid);
  auto normalized = normalize_text(question, engine.normalize);
  request.timer.finish(Stage::kNormalize);
  if (!normalized) return fail(normalized.status());
  // Cache keys carry the tenant, so tenants never share an entry.
  request.key = CacheKey(options.tenant, std::move(normalized).value());
  if (auto too_short = refuse_too_short(request)) return finish(request, std::move(*too_short));

  if (auto hit = lookup_exact_tiers(request)) return finish(request, std::move(*hit));

  request.top_k = options.top_k.value_or(engine.top_k);
  request.min_score = options.min_answer_score.value_or(engine.min_answer_score);
  request.min_confidence = options.min_answer_confidence.value_or(engine.min_answer_confidence);
  const auto timeout = std::min<std::chrono::milliseconds>(
      options.timeout.count() > 0 ? options.timeout : engine.degradation.default_timeout, kMaxTimeout);
  if (timeout.count() > 0) request.deadline = request.clock_started + timeout;

  std::optional<Answer> degraded;
  if (Status encoded = encode(request, degraded); !encoded.is_ok()) return fail(encoded);
  if (degraded) return finish(request, std::move(*degraded));
  if (auto hit = lookup_semantic_tier(request)) return finish(request, std::move(*hit));
  auto answer = retrieve_and_read(request);
  if (!answer) return fail(answer.status());
  return finish(request, std::move(answer).value());
}

std::optional<Answer> AskPipeline::ask_cached(std::string_view question, const AskOptions& options) {
  const EngineOptions& engine = *parts_.options;
  Request request(question, options, engine.clock->now());
  request.use = parts_.tiers->use_for(options);
  if (!request.use.result || !validate_ask_options(options).is_ok()) return std::nullopt;
  auto normalized = normalize_text(question, engine.normalize);
  request.timer.finish(Stage::kNormalize);
  if (!normalized) return std::nullopt;
  request.key = CacheKey(options.tenant, std::move(normalized).value());
  auto hit = parts_.tiers->lookup_result_if_cached(request.key);
  if (!hit) return std::nullopt;
  request.timer.finish(Stage::kResultCache);
  auto answer = finish(request, std::move(*hit));
  return std::move(answer).value();
}

std::optional<Answer> AskPipeline::refuse_too_short(const Request& request) const {
  const EngineOptions& engine = *parts_.options;
  const std::size_t characters = text::count_letters_and_numbers(request.key.question);
  if (characters >= engine.min_question_characters) return std::nullopt;
  // Whatever the knowledge base holds, one letter or an emoji matches
  // something by chance: no answer is better than a confident-looking one.
  Answer answer;
  answer.text = engine.fallback_answer;
  answer.tier = AnswerTier::kFallback;
  answer.fallback_reason = fmt::format("too little to match: {} letter(s) or digit(s), min_question_characters is {}",
                                       characters, engine.min_question_characters);
  return answer;
}

std::optional<Answer> AskPipeline::lookup_exact_tiers(Request& request) {
  CacheTiers& tiers = *parts_.tiers;
  if (request.use.result) {
    auto hit = tiers.lookup_result(request.key);
    request.timer.finish(Stage::kResultCache);
    if (hit) return hit;
  }
  // The knowledge is read under the shared lock for the rest of the
  // request, so an update cannot slip between retrieval and the cache
  // fill and leave an answer from the old version in a cache.
  request.knowledge_lock = parts_.knowledge->read();
  if (!request.use.knowledge) return std::nullopt;
  // Timed with the result tier: both are exact lookups by question.
  request.looked_up_knowledge = true;
  auto hit = tiers.lookup_knowledge(request.key, parts_.knowledge->base());
  request.timer.finish(Stage::kResultCache);
  if (hit && request.use.result) tiers.fill_result(request.key, *hit, cache_ttl_of(*hit));
  return hit;
}

Status AskPipeline::encode(Request& request, std::optional<Answer>& degraded) {
  const Encoder& encoder = *parts_.encoder;
  const std::string text = encoder.wants_normalized_text() ? request.key.question : std::string(request.question);
  if (parts_.batching) {
    // The model's vectors do not depend on the knowledge: wait for it
    // without the lock, so updates are never held behind the model. The
    // semantic lookup, retrieval and cache fill run under one hold again,
    // so an update still cannot slip between them.
    request.knowledge_lock.unlock();
    std::string why_not_model = parts_.batching->encode(text, request.options.priority, request.deadline, request.vector);
    request.knowledge_lock.lock();
    request.timer.finish(Stage::kEncode);
    if (!why_not_model.empty()) {
      degraded = parts_.degraded->answer(std::move(why_not_model), request.key, request.deadline, request.top_k,
                                         request.use.any, *parts_.tiers, parts_.knowledge->base());
      request.timer.finish(Stage::kRetrieve);
      return Status::ok();
    }
  } else {
    Status encoded = request.deadline
                         ? encoder.encode_within({text}, request.vector, *request.deadline - parts_.options->clock->now())
                         : encoder.encode({text}, request.vector);
    request.timer.finish(Stage::kEncode);
    if (!encoded.is_ok()) return encoded;
  }
  // A broken encoder (NaN weights, a user's encoder with a bug) must not
  // reach retrieval: NaN similarities compare as "good enough".
  const std::vector<float>& v = request.vector;
  if (v.size() != encoder.dimension() || !std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); })) {
    return Status::internal(fmt::format("the encoder {} returned a vector of {} values, not {} finite ones",
                                        encoder.name(), v.size(), encoder.dimension()));
  }
  return Status::ok();
}

std::optional<Answer> AskPipeline::lookup_semantic_tier(Request& request) {
  if (!request.use.semantic) return std::nullopt;
  request.looked_up_semantic = true;
  request.semantic =
      parts_.tiers->lookup_semantic(request.vector.data(), request.key, request.options.semantic_threshold);
  request.timer.finish(Stage::kSemanticCache);
  std::optional<Answer> hit = std::exchange(request.semantic.answer, std::nullopt);
  if (hit && request.use.result) parts_.tiers->fill_result(request.key, *hit, cache_ttl_of(*hit));
  return hit;
}

Result<Answer> AskPipeline::retrieve_and_read(Request& request) {
  const EngineOptions& engine = *parts_.options;
  const auto matches =
      parts_.knowledge->base().search(request.key.question, request.vector.data(), std::max<std::size_t>(request.top_k, 1));
  request.timer.finish(Stage::kRetrieve);

  Answer answer = answer_from_matches(matches, {request.min_score, request.min_confidence, engine.fallback_answer});
  const SemanticLookup& semantic = request.semantic;
  answer.nearest_cached_similarity = semantic.nearest_similarity;
  answer.near_miss_reason = semantic.refused_reason;
  answer.cache_threshold = semantic.threshold;
  answer.cache_decision = semantic.decision;
  if (semantic.observation) {
    // The cached answer the semantic tier passed over (or is checking) is
    // judged by what retrieval answered: the same entry, or not.
    parts_.tiers->semantic()->record_outcome(*semantic.observation,
                                             answer.tier == AnswerTier::kKnowledge ? answer.entry_id() : std::string());
  }
  bool cacheable = true;
  if (engine.generator && answer.tier == AnswerTier::kKnowledge) {
    auto unchanged = generate_answer(request, matches, answer);  // `matches` is stale after this
    request.timer.finish(Stage::kInfer);
    if (!unchanged) return unchanged.status();
    cacheable = *unchanged;
  } else if (engine.reader && answer.tier == AnswerTier::kKnowledge) {
    if (request.deadline && engine.clock->now() >= *request.deadline) {
      answer.degraded = true;
      answer.degraded_reason = "the deadline passed before the reader ran: FAQ answer given";
    } else {
      read_answer(request, matches, answer);
    }
    request.timer.finish(Stage::kInfer);
  }
  if (answer.matches.size() > request.top_k && !answer.generated) answer.matches.resize(request.top_k);
  // A fallback is never cached: a later entry may answer the question.
  // Neither is an answer the reader or the generator failed on: the next
  // ask should try again.
  if (answer.tier == AnswerTier::kKnowledge && !answer.degraded && cacheable) {
    parts_.tiers->fill(request.use, request.key, request.vector.data(), answer, cache_ttl_of(answer));
  }
  request.timer.finish(Stage::kPostprocess);
  return answer;
}

Result<bool> AskPipeline::generate_answer(Request& request, const std::vector<KnowledgeMatch>& matches, Answer& answer) {
  const EngineOptions& engine = *parts_.options;
  // The sources, copied: the entries may change while the lock is released.
  std::vector<GenerationSource> sources;
  std::vector<EntryMatch> provenance;
  for (const auto& m : matches) {
    if (sources.size() == engine.generator_sources || m.similarity < request.min_score) break;
    sources.push_back({m.entry->id, m.entry->question, m.entry->answer, m.entry->context});
  }
  // The answer's provenance is every entry the generator read.
  for (std::size_t i = 0; i < sources.size() && i < answer.matches.size(); ++i) provenance.push_back(answer.matches[i]);
  std::chrono::nanoseconds time_left = std::chrono::nanoseconds::max();
  if (request.deadline) time_left = *request.deadline - engine.clock->now();
  const std::string question(request.question);
  request.knowledge_lock.unlock();
  GenerationResult generated;
  bool streamed = false;
  const Status s = time_left.count() <= 0
                       ? Status::deadline_exceeded("the deadline passed before the generator ran")
                       : engine.generator->generate(question, sources, time_left, request.options.on_token, generated,
                                                    streamed);
  request.knowledge_lock.lock();
  request.streamed = streamed;
  if (!s.is_ok()) {
    // Text already reached the caller: another answer must not follow it.
    if (streamed) return Status(s.code(), "the generation failed after it began: " + s.message());
    answer.degraded = true;
    answer.degraded_reason = "generation failed, FAQ answer given: " + s.message();
    return true;
  }
  answer.text = std::move(generated.text);
  answer.generated = true;
  answer.matches = std::move(provenance);
  // Cached only when every source is still at the version it was read at.
  const KnowledgeBase& knowledge = parts_.knowledge->base();
  for (const auto& m : answer.matches) {
    const KnowledgeEntry* now = knowledge.find(m.entry_id);
    if (!now || now->version != m.version) return false;
  }
  return true;
}

// A reader failure keeps the FAQ answer and says so: the request still gets
// an answer.
void AskPipeline::read_answer(Request& request, const std::vector<KnowledgeMatch>& matches, Answer& answer) const {
  const EngineOptions& engine = *parts_.options;
  // The best entry decides: without a passage of its own, its FAQ answer
  // stands rather than a span from a less relevant entry.
  if (matches.empty() || matches.front().entry->context.empty()) return;
  std::vector<std::string> passages;
  std::vector<const KnowledgeEntry*> owners;
  for (const auto& m : matches) {
    if (owners.size() == engine.reader_passages || m.similarity < request.min_score) break;
    if (m.entry->context.empty()) continue;
    passages.push_back(m.entry->context);
    owners.push_back(m.entry);
  }
  if (passages.empty()) return;
  auto spans = engine.reader->read(std::string(request.question), passages, 1);
  if (!spans) {
    answer.degraded = true;
    answer.degraded_reason = "reader failed, FAQ answer given: " + spans.status().message();
    return;
  }
  if (spans->empty()) return;
  const AnswerSpan& best = spans->front();
  answer.text = best.text;
  answer.extracted = ExtractedSpan{owners[best.passage]->id, best.begin, best.end, best.score, best.probability};
}

std::chrono::milliseconds AskPipeline::cache_ttl_of(const Answer& answer) const {
  const KnowledgeBase& knowledge = parts_.knowledge->base();
  std::chrono::milliseconds ttl{0};
  auto shorten = [&](const std::string& id) {
    const KnowledgeEntry* e = knowledge.find(id);
    if (e && e->cache_ttl.count() > 0 && (ttl.count() == 0 || e->cache_ttl < ttl)) ttl = e->cache_ttl;
  };
  if (!answer.matches.empty()) shorten(answer.matches.front().entry_id);
  if (answer.extracted) shorten(answer.extracted->entry_id);
  return ttl;
}

}  // namespace rapidqa::engine
