// Feeds the Redis change-message decoder (parse_change_message): what
// another instance, or anyone who can write to the Redis stream or
// channel, sends. A message that decodes must encode again
// (encode_change_message) and decode to the same change.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/change_message.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using rapidqa::fuzz::check;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto message = rapidqa::cache::parse_change_message(text);
  if (!message.is_ok() || message->origin_dropped_changes) return 0;
  const auto& change = message->change;
  const std::string encoded = rapidqa::cache::encode_change_message(change);
  auto back = rapidqa::cache::parse_change_message(encoded);
  check(back.is_ok(), "an accepted change does not decode after encoding",
        back.is_ok() ? encoded : back.status().message() + " in " + encoded);
  const auto& b = back->change;
  check(b.kind == change.kind && b.entry_id == change.entry_id && b.version == change.version &&
            b.origin == change.origin && b.entry.has_value() == change.entry.has_value(),
        "a change differs after encoding and decoding", encoded);
  if (change.entry) {
    check(b.entry->id == change.entry->id && b.entry->question == change.entry->question &&
              b.entry->answer == change.entry->answer && b.entry->alternates == change.entry->alternates,
          "a change's entry differs after encoding and decoding", encoded);
  }
  return 0;
}
