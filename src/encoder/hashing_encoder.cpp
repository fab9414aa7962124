
#include "rapidqa/hashing_encoder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "common/checksum.h"
#include "common/guard.h"
#include "common/squared_norm.h"
#include "text/feature_hash.h"
#include "text/lexical_tokenizer.h"
#include "text/utf8.h"

namespace rapidqa {
namespace {

constexpr std::size_t kMaxHashingDimension = 65536;  // 256 KiB per vector: far past any use
constexpr std::size_t kMaxCharNgram = 32;

// Feature kinds are mixed into the hash so "ab" as a word and "ab" as a
// character n-gram land in different buckets.
enum class FeatureKind : std::uint8_t { kWord = 1, kWordBigram, kCharNgram, kCjkChar, kCjkBigram };

using text::fnv1a;
using text::mix64;

struct Feature {
  std::uint64_t hash;
  float weight;
};

}  // namespace

// IDF per feature hash in one open-addressing table (a power of two of
// slots, at most half full, linear probing): a lookup reads one cache line,
// where a node-based map took two or three misses per feature and the
// lookups were most of an encode.
class IdfTable {
 public:
  bool empty() const { return count_ == 0; }

  // `idf`: (hash, IDF) pairs with distinct hashes, any container of them.
  template <typename Pairs>
  void assign(const Pairs& idf) {
    std::size_t slots = 16;
    while (slots < 2 * idf.size()) slots *= 2;
    slots_.assign(slots, Slot{});
    mask_ = slots - 1;
    count_ = idf.size();
    zero_hash_value_.reset();
    for (const auto& [hash, value] : idf) {
      if (hash == kEmpty) {
        zero_hash_value_ = value;
        continue;
      }
      std::size_t i = hash & mask_;
      while (slots_[i].hash != kEmpty) i = (i + 1) & mask_;
      slots_[i] = {hash, value};
    }
  }

  // Every (hash, IDF) pair, ordered by hash (so equal tables serialize to
  // equal bytes).
  std::vector<std::pair<std::uint64_t, float>> entries() const {
    std::vector<std::pair<std::uint64_t, float>> all;
    all.reserve(count_);
    if (zero_hash_value_) all.emplace_back(kEmpty, *zero_hash_value_);
    for (const Slot& slot : slots_) {
      if (slot.hash != kEmpty) all.emplace_back(slot.hash, slot.value);
    }
    std::sort(all.begin(), all.end());
    return all;
  }

  // Brings the slot `hash` starts probing at into the cache: a table of a
  // large corpus's features is megabytes, and an encode looks up each of
  // its features once.
  void prefetch(std::uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & mask_]);
  }

  // The IDF of `hash`, or `absent` when the corpus never had it.
  float find(std::uint64_t hash, float absent) const {
    if (hash == kEmpty) return zero_hash_value_.value_or(absent);
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].hash == hash) return slots_[i].value;
      if (slots_[i].hash == kEmpty) return absent;
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = 0;  // a real hash of 0 lives in zero_hash_value_
  struct Slot {
    std::uint64_t hash = kEmpty;
    float value = 0;
  };
  std::vector<Slot> slots_;
  std::size_t mask_ = 0, count_ = 0;
  std::optional<float> zero_hash_value_;
};

// The terms of words encoded before, so a repeated word costs one lookup
// instead of hashing its score of character n-grams and reading their IDF
// (most of an encode, and its IDF reads miss the cache more the larger the
// knowledge base). A term is what encode adds to the vector: (bucket, signed
// weight x IDF); adding a word's cached terms in the order they were made
// gives the same vector bit for bit. Bounded by bytes: a shard that is full
// takes no more words (a stream of made-up words costs the bound, 8 MiB,
// then only misses). Cleared whenever the IDF changes.
class WordTermsCache {
 public:
  struct Term {
    std::uint32_t bucket;
    float value;
  };
  using Terms = std::vector<Term>;

  // Adds the word's terms to `vector` and returns true, or returns false
  // when the word is not cached.
  bool add_to(std::string_view word, float* vector) const {
    if (word.size() > kMaxWordBytes) return false;
    Shard& shard = shard_for(word);
    std::lock_guard<std::mutex> lock(shard.mu);
    const auto it = shard.words.find(std::string(word));  // short words: no allocation
    if (it == shard.words.end()) return false;
    for (const Term& term : it->second) vector[term.bucket] += term.value;
    return true;
  }
  void insert(std::string_view word, const Terms& terms) const {
    if (word.size() > kMaxWordBytes) return;
    // What the entry holds, with the map's node and the vector's header.
    const std::size_t cost = word.size() + terms.size() * sizeof(Term) + kEntryOverheadBytes;
    Shard& shard = shard_for(word);
    std::lock_guard<std::mutex> lock(shard.mu);
    if (shard.bytes + cost > kBytesPerShard) return;
    if (shard.words.emplace(std::string(word), terms).second) shard.bytes += cost;
  }
  void clear() {
    for (Shard& shard : shards_) {
      std::lock_guard<std::mutex> lock(shard.mu);
      shard.words.clear();
      shard.bytes = 0;
    }
  }

 private:
  static constexpr std::size_t kShards = 16;                 // concurrent encodes rarely meet on one lock
  static constexpr std::size_t kBytesPerShard = 512 << 10;   // 8 MiB in all: some 30,000 words of 8 letters
  static constexpr std::size_t kMaxWordBytes = 48;           // longer "words" are rare and often junk
  static constexpr std::size_t kEntryOverheadBytes = 96;
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Terms> words;
    std::size_t bytes = 0;
  };
  Shard& shard_for(std::string_view word) const {
    return shards_[text::fnv1a(text::kFnvOffset, word) % kShards];
  }
  mutable std::array<Shard, kShards> shards_;
};

struct HashingEncoder::Impl {
  HashingEncoderOptions options;
  text::BucketOf bucket;  // hash % options.dimension
  WordTermsCache word_terms;  // cleared with every change of `idf`
  // IDF per feature hash, learned by adapt(); empty means IDF 1 everywhere.
  IdfTable idf;
  float unseen_idf = 1.0f;  // IDF of a feature absent from the corpus
  // XXH64 of learned_state(), 0 when nothing is learned: kept with the
  // table (set by adapt and restore) so fingerprint() need not serialize a
  // table of millions of features at every call.
  std::uint64_t state_checksum = 0;

  std::uint64_t feature_hash(FeatureKind kind, std::string_view a, std::string_view b = {}) const {
    std::uint64_t h = text::kFnvOffset ^ mix64(options.seed + static_cast<std::uint64_t>(kind));
    h = fnv1a(h, a);
    if (!b.empty()) {
      h ^= 0x1f;  // separator: ("ab","c") differs from ("a","bc")
      h *= text::kFnvPrime;
      h = fnv1a(h, b);
    }
    return mix64(h);
  }

  // Every n-gram of "<word>" from char_ngram_min to char_ngram_max
  // characters, all of length n before any of length n + 1. FNV-1a reads a
  // byte at a time, so the grams from one start share their hashing: each
  // longer one goes on from the shorter one's state by one character.
  void add_char_ngrams(std::string_view word, text::MarkedWord& marked, std::vector<Feature>& out) const {
    text::mark_word_into(word, marked);
    const std::size_t chars = marked.characters();
    const std::size_t shortest = options.char_ngram_min;
    const std::size_t longest = std::min(options.char_ngram_max, chars);
    if (shortest > longest) return;
    // Where the grams of each length start in `out`.
    std::size_t first_of[kMaxCharNgram + 2];
    first_of[shortest] = out.size();
    for (std::size_t n = shortest; n <= longest; ++n) first_of[n + 1] = first_of[n] + (chars - n + 1);
    out.resize(first_of[longest + 1]);
    const std::uint64_t start = gram_hash_start();
    const std::string_view text = marked.text;
    for (std::size_t i = 0; i + shortest <= chars; ++i) {
      std::uint64_t h = text::fnv1a(start, text.substr(marked.starts[i], marked.starts[i + shortest - 1] - marked.starts[i]));
      for (std::size_t n = shortest; n <= longest && i + n <= chars; ++n) {
        h = text::fnv1a(h, text.substr(marked.starts[i + n - 1], marked.starts[i + n] - marked.starts[i + n - 1]));
        out[first_of[n] + i] = {mix64(h), options.char_ngram_weight};
      }
    }
  }

  // A character n-gram's hash before its bytes: feature_hash(kCharNgram, g)
  // is mix64(fnv1a(gram_hash_start(), g)).
  std::uint64_t gram_hash_start() const {
    return text::kFnvOffset ^ mix64(options.seed + static_cast<std::uint64_t>(FeatureKind::kCharNgram));
  }

  // Walks the text in the order encode adds its features: each token's own
  // features (own(token): the CJK character, or the word and its n-grams),
  // then its bigram with the next token (bigram(Feature)).
  template <typename Own, typename Bigram>
  void walk(std::string_view text, Own&& own, Bigram&& bigram) const {
    std::optional<text::LexicalToken> previous;
    text::for_each_lexical_token(text, [&](const text::LexicalToken& token) {
      if (previous) bigram(bigram_feature(*previous, token));
      previous = token;
      own(token);
    });
  }

  // Every feature of the text, in the order encode adds them.
  std::vector<Feature> features(std::string_view text) const {
    std::vector<Feature> out;
    text::MarkedWord marked;
    walk(
        text,
        [&](const text::LexicalToken& token) {
          if (token.cjk) {
            out.push_back(cjk_char_feature(token.text));
          } else {
            word_features(token.text, marked, out);
          }
        },
        [&](const Feature& bigram) { out.push_back(bigram); });
    return out;
  }

  Feature cjk_char_feature(std::string_view character) const {
    return {feature_hash(FeatureKind::kCjkChar, character), options.cjk_char_weight};
  }
  // A word's own features, appended: the word, then its character n-grams.
  void word_features(std::string_view word, text::MarkedWord& marked, std::vector<Feature>& out) const {
    out.push_back({feature_hash(FeatureKind::kWord, word), options.word_weight});
    if (options.char_ngram_weight > 0) add_char_ngrams(word, marked, out);
  }
  Feature bigram_feature(const text::LexicalToken& token, const text::LexicalToken& next) const {
    if (token.cjk && next.cjk) {
      return {feature_hash(FeatureKind::kCjkBigram, token.text, next.text), options.cjk_bigram_weight};
    }
    return {feature_hash(FeatureKind::kWordBigram, token.text, next.text), options.word_bigram_weight};
  }

  // What a feature adds to the vector, at its bucket.
  float term_value(const Feature& f) const {
    const float sign = (f.hash >> 63) ? -1.0f : 1.0f;
    return sign * f.weight * idf_of(f.hash);
  }
  void add(const Feature& f, float* vector) const { vector[bucket.of(f.hash)] += term_value(f); }

  float idf_of(std::uint64_t hash) const {
    return idf.empty() ? 1.0f : idf.find(hash, unseen_idf);
  }
};

Status validate_hashing_encoder_options(const HashingEncoderOptions& o) {
  if (o.dimension == 0 || o.dimension > kMaxHashingDimension) {
    return Status::invalid_argument(
        fmt::format("dimension must be in [1, {}], not {}", kMaxHashingDimension, o.dimension));
  }
  if (o.char_ngram_min == 0 || o.char_ngram_max < o.char_ngram_min || o.char_ngram_max > kMaxCharNgram) {
    return Status::invalid_argument(fmt::format("char_ngram_min {} and char_ngram_max {} must satisfy 1 <= min <= max <= {}",
                                                o.char_ngram_min, o.char_ngram_max, kMaxCharNgram));
  }
  for (const auto& [name, weight] : {std::pair<const char*, float>{"word_weight", o.word_weight},
                                     {"word_bigram_weight", o.word_bigram_weight},
                                     {"char_ngram_weight", o.char_ngram_weight},
                                     {"cjk_char_weight", o.cjk_char_weight},
                                     {"cjk_bigram_weight", o.cjk_bigram_weight}}) {
    if (!std::isfinite(weight) || weight < 0.0f) {
      return Status::invalid_argument(fmt::format("{} must be a finite number >= 0, not {}", name, weight));
    }
  }
  return Status::ok();
}

Result<std::unique_ptr<HashingEncoder>> HashingEncoder::create(HashingEncoderOptions options) {
  if (Status valid = validate_hashing_encoder_options(options); !valid.is_ok()) return valid;
  return detail::guarded("creating the hashing encoder", [&]() -> Result<std::unique_ptr<HashingEncoder>> {
    return std::unique_ptr<HashingEncoder>(new HashingEncoder(Checked{}, options));
  });
}

HashingEncoder::HashingEncoder(Checked, HashingEncoderOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->bucket = text::BucketOf(options.dimension);
}

HashingEncoder::HashingEncoder(HashingEncoderOptions options) : HashingEncoder(Checked{}, [&] {
  if (options.dimension == 0) options.dimension = 1;
  if (options.char_ngram_min == 0) options.char_ngram_min = 1;
  if (options.char_ngram_max < options.char_ngram_min) options.char_ngram_max = options.char_ngram_min;
  return options;
}()) {}

HashingEncoder::~HashingEncoder() = default;

std::size_t HashingEncoder::dimension() const { return impl_->options.dimension; }

std::string HashingEncoder::name() const { return fmt::format("hashing-{}", impl_->options.dimension); }

Status HashingEncoder::encode_one(const std::string& text, float* out) const {
  const std::size_t dim = impl_->options.dimension;
  std::fill(out, out + dim, 0.0f);
  if (text::find_invalid_utf8(text) != std::string_view::npos) {
    return Status::invalid_argument("text to encode is not valid UTF-8");
  }
  // Each word's own features from the word cache where it has them.
  const Impl& impl = *impl_;
  text::MarkedWord marked;
  std::vector<Feature> word_features;
  WordTermsCache::Terms terms;
  impl.walk(
      text,
      [&](const text::LexicalToken& token) {
        if (token.cjk) {
          impl.add(impl.cjk_char_feature(token.text), out);
          return;
        }
        if (impl.word_terms.add_to(token.text, out)) return;
        word_features.clear();
        impl.word_features(token.text, marked, word_features);
        // The IDF reads miss the cache independently: ask for them all first.
        for (const Feature& f : word_features) impl.idf.prefetch(f.hash);
        terms.clear();
        for (const Feature& f : word_features) {
          terms.push_back({static_cast<std::uint32_t>(impl.bucket.of(f.hash)), impl.term_value(f)});
          out[terms.back().bucket] += terms.back().value;
        }
        impl.word_terms.insert(token.text, terms);
      },
      [&](const Feature& bigram) { impl.add(bigram, out); });
  const double norm = squared_norm(out, dim);
  if (norm > 0) {
    const auto inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (std::size_t i = 0; i < dim; ++i) out[i] *= inv;
  }
  return Status::ok();
}

Status HashingEncoder::encode(const std::vector<std::string>& texts, std::vector<float>& out) const {
  const std::size_t dim = impl_->options.dimension;
  out.assign(texts.size() * dim, 0.0f);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    Status s = encode_one(texts[i], out.data() + i * dim);
    if (!s.is_ok()) return Status::invalid_argument(fmt::format("text {}: {}", i, s.message()));
  }
  return Status::ok();
}

void HashingEncoder::adapt(const std::vector<std::string>& corpus) {
  std::unordered_map<std::uint64_t, std::uint32_t> document_frequency;
  std::unordered_set<std::uint64_t> seen;
  for (const auto& doc : corpus) {
    if (text::find_invalid_utf8(doc) != std::string_view::npos) continue;
    seen.clear();
    for (const Feature& f : impl_->features(doc)) {
      if (seen.insert(f.hash).second) ++document_frequency[f.hash];
    }
  }
  // Smoothed IDF, as scikit-learn's TfidfVectorizer: ln((1+N)/(1+df)) + 1.
  const double n = static_cast<double>(corpus.size());
  std::unordered_map<std::uint64_t, float> idf;
  idf.reserve(document_frequency.size());
  for (const auto& [hash, df] : document_frequency) {
    idf.emplace(hash, static_cast<float>(std::log((1.0 + n) / (1.0 + df)) + 1.0));
  }
  impl_->idf.assign(idf);
  impl_->word_terms.clear();  // its terms carry the old IDF
  impl_->unseen_idf = static_cast<float>(std::log(1.0 + n) + 1.0);
  const std::string state = learned_state();
  impl_->state_checksum = state.empty() ? 0 : detail::xxh64(state.data(), state.size());
}

// The learned state: "RQIDF1", the pair count (u64), the IDF of unseen
// features (f32), then each (hash u64, IDF f32), ordered by hash; all
// little-endian, as on every machine rapidqa runs on.
namespace {
constexpr char kStateMagic[] = "RQIDF1";
constexpr std::size_t kStateMagicBytes = sizeof(kStateMagic) - 1;
constexpr std::size_t kStateHeaderBytes = kStateMagicBytes + 8 + 4;
constexpr std::size_t kStatePairBytes = 12;

template <typename T>
void append_bytes(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}
template <typename T>
T read_bytes(const std::string& in, std::size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(value));
  return value;
}
}  // namespace

std::string HashingEncoder::learned_state() const {
  if (impl_->idf.empty()) return {};
  const auto pairs = impl_->idf.entries();
  std::string state(kStateMagic, kStateMagicBytes);
  state.reserve(kStateHeaderBytes + pairs.size() * kStatePairBytes);
  append_bytes<std::uint64_t>(state, pairs.size());
  append_bytes<float>(state, impl_->unseen_idf);
  for (const auto& [hash, idf] : pairs) {
    append_bytes<std::uint64_t>(state, hash);
    append_bytes<float>(state, idf);
  }
  return state;
}

Status HashingEncoder::restore_learned_state(const std::string& state) {
  if (state.empty()) {
    impl_->idf.assign(std::vector<std::pair<std::uint64_t, float>>());
    impl_->word_terms.clear();  // its terms carry the old IDF
    impl_->unseen_idf = 1.0f;
    impl_->state_checksum = 0;
    return Status::ok();
  }
  if (state.size() < kStateHeaderBytes || state.compare(0, kStateMagicBytes, kStateMagic) != 0) {
    return Status::invalid_argument("not a hashing encoder's learned state (no RQIDF1 header)");
  }
  const auto count = read_bytes<std::uint64_t>(state, kStateMagicBytes);
  if (count > (state.size() - kStateHeaderBytes) / kStatePairBytes ||
      state.size() != kStateHeaderBytes + count * kStatePairBytes) {
    return Status::invalid_argument(fmt::format("hashing encoder state: {} bytes cannot hold {} features",
                                                state.size(), count));
  }
  const auto unseen = read_bytes<float>(state, kStateMagicBytes + 8);
  if (!std::isfinite(unseen) || unseen <= 0.0f) {
    return Status::invalid_argument(fmt::format("hashing encoder state: unseen IDF {}", unseen));
  }
  // Pairs straight into the table: no node per feature (a million-entry
  // knowledge base has millions of features, and a restart reads them all).
  std::vector<std::pair<std::uint64_t, float>> pairs(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t at = kStateHeaderBytes + i * kStatePairBytes;
    const auto hash = read_bytes<std::uint64_t>(state, at);
    const auto value = read_bytes<float>(state, at + 8);
    if (!std::isfinite(value) || value <= 0.0f) {
      return Status::invalid_argument(fmt::format("hashing encoder state: feature {} has IDF {}", i, value));
    }
    // Written ordered by hash: order also proves the hashes distinct.
    if (i > 0 && hash <= pairs[i - 1].first) {
      return Status::invalid_argument(
          fmt::format("hashing encoder state: feature {} is out of order or repeated", i));
    }
    pairs[i] = {hash, value};
  }
  impl_->idf.assign(pairs);
  impl_->word_terms.clear();  // its terms carry the old IDF
  impl_->unseen_idf = unseen;
  // As adapt() keeps it: 0 for an empty table, which learned_state() writes as "".
  impl_->state_checksum = pairs.empty() ? 0 : detail::xxh64(state.data(), state.size());
  return Status::ok();
}

std::string HashingEncoder::fingerprint() const {
  const HashingEncoderOptions& o = impl_->options;
  return fmt::format("hashing/v1/dim={}/seed={}/weights={},{},{},{},{}/ngrams={}-{}/idf={:016x}", o.dimension,
                     o.seed, o.word_weight, o.word_bigram_weight, o.char_ngram_weight, o.cjk_char_weight,
                     o.cjk_bigram_weight, o.char_ngram_min, o.char_ngram_max,
                     impl_->state_checksum);
}

}  // namespace rapidqa
