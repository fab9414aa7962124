// Encoder: turns texts into L2-normalised vectors of a fixed dimension, so
// that the inner product of two vectors is their cosine similarity. The
// engine retrieves and caches through this interface and never depends on a
// particular model.
//
// Thread safety: implementations must make encode() thread-safe; adapt() and
// restore_learned_state() are
// called by the engine under its own exclusive lock, never concurrently with
// encode().
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct MetricsSnapshot;

class RAPIDQA_EXPORT Encoder {
 public:
  virtual ~Encoder() = default;

  // Length of every vector this encoder produces.
  virtual std::size_t dimension() const = 0;

  // A short human-readable name ("hashing-384").
  virtual std::string name() const = 0;

  // Encodes texts.size() texts into out, row-major, texts.size() *
  // dimension() floats; out is resized by the call. Texts are normalised
  // (see normalize_text) by the caller when wants_normalized_text(). Fails with kInvalidArgument on text
  // the encoder cannot read; out is then unspecified.
  virtual Status encode(const std::vector<std::string>& texts, std::vector<float>& out) const = 0;

  // encode() for callers with a deadline: time_left is what remains of the
  // earliest deadline among the texts' requests. An encoder that waits on
  // something else (a remote engine) gives up when it runs out, with
  // kDeadlineExceeded, and may tell that engine the budget. The default
  // ignores it.
  virtual Status encode_within(const std::vector<std::string>& texts, std::vector<float>& out,
                               std::chrono::nanoseconds time_left) const {
    (void)time_left;
    return encode(texts, out);
  }

  // Adds the encoder's own counters to an engine's metrics (a remote
  // encoder's endpoints and circuit breaker). The default adds nothing.
  virtual void add_metrics(MetricsSnapshot& snapshot) const { (void)snapshot; }

  // Whether encode() costs microseconds (a lexical encoder): the engine
  // then calls it inline rather than batching, and never needs to degrade
  // around it.
  virtual bool is_lightweight() const { return false; }

  // Whether encode() expects normalize_text() output (lower-cased, no
  // punctuation). A transformer reads the text as written instead.
  virtual bool wants_normalized_text() const { return true; }

  // Called with every phrasing of the knowledge base when a knowledge base
  // is loaded, so encoders that learn corpus statistics (IDF) can refit.
  // Vectors encoded before the call are not comparable with those after.
  virtual void adapt(const std::vector<std::string>& corpus) { (void)corpus; }

  // What makes this encoder's vectors what they are: its kind, dimension,
  // options and model files, and whatever adapt() learned. Two encoders
  // with the same fingerprint make the same vector from the same text, so
  // a knowledge store keeps vectors under the fingerprint that made them
  // and a restart reuses them only under the same one. The default is
  // name() and dimension(); an encoder with options, files or learned
  // state must override it.
  virtual std::string fingerprint() const;

  // What adapt() learned, as bytes to keep, and the same bytes given back
  // after a restart, so vectors made before the restart still compare with
  // those made after. Encoders that learn nothing return "" and accept
  // only "". restore_state refuses bytes it cannot read with
  // kInvalidArgument and then changes nothing.
  virtual std::string learned_state() const { return {}; }
  virtual Status restore_learned_state(const std::string& state);
};

}  // namespace rapidqa
