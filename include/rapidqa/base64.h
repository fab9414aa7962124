// Base64 (RFC 4648: the standard alphabet, padded with '='): the form in
// which the OpenAI embeddings API ("encoding_format": "base64") carries
// float vectors, so both ends of a remote encoder spend their time here. A
// batch of 64 384-dimensional vectors is 131 KB of base64; OpenSSL's
// byte-at-a-time codec took about 50 µs for it at each end, this one a few.
// Runs 24 bytes per step on AVX2 where the CPU has it (chosen at run time),
// one group of three bytes at a time elsewhere; the output is the same.
//
// Thread safety: free functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

// `size` bytes as padded base64, appended to `out` (so a JSON body can be
// written in place).
RAPIDQA_EXPORT void append_base64(const void* data, std::size_t size, std::string& out);

// Decodes padded base64 into `out` (replacing its contents). Strict: the
// length must be a multiple of four and every character in the alphabet,
// with at most two '=' at the very end; no white space.
// Errors: kInvalidArgument naming the first offending position.
RAPIDQA_EXPORT Status base64_decode(std::string_view text, std::string& out);

}  // namespace rapidqa
