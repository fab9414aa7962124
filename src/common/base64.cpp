#include "rapidqa/base64.h"

#include <immintrin.h>

#include <cstdint>

#include <fmt/format.h>

namespace rapidqa {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The sextet each character stands for; -1 outside the alphabet.
struct SextetTable {
  std::int8_t of[256] = {};
  constexpr SextetTable() {
    for (int c = 0; c < 256; ++c) of[c] = -1;
    for (int i = 0; i < 64; ++i) of[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::int8_t>(i);
  }
};
constexpr SextetTable kSextet;

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}

// ---- encoding --------------------------------------------------------------

void encode_groups(const unsigned char* in, std::size_t groups, char* out) {
  for (std::size_t g = 0; g < groups; ++g, in += 3, out += 4) {
    const std::uint32_t v = (std::uint32_t{in[0]} << 16) | (std::uint32_t{in[1]} << 8) | in[2];
    out[0] = kAlphabet[v >> 18];
    out[1] = kAlphabet[(v >> 12) & 63];
    out[2] = kAlphabet[(v >> 6) & 63];
    out[3] = kAlphabet[v & 63];
  }
}

// 24 bytes to 32 characters per step; returns the bytes it encoded (a
// multiple of 24). Each step's second 16-byte load reaches 4 bytes past the
// 24 it encodes, so it stops 28 bytes from the end.
__attribute__((target("avx2"))) std::size_t encode_avx2(const unsigned char* in, std::size_t size, char* out) {
  // Each 128-bit lane takes four groups of three bytes (a, b, c), placed
  // b, a, c, b in the group's 32 bits: the 16-bit halves are then a:b and
  // b:c, and each sextet sits at fixed bits of one half.
  const __m256i spread = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,  //
                                          1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
  // Sextet 0 (bits 10-15 of a:b) and sextet 2 (bits 6-11 of b:c) move down
  // to bytes 0 and 2 through the high half of a multiply by 2^6 and 2^10;
  // sextets 1 (bits 4-9 of a:b) and 3 (bits 0-5 of b:c) up to bytes 1 and 3
  // through the low half of a multiply by 2^4 and 2^8.
  const __m256i first_third = _mm256_set1_epi32(0x0FC0FC00), down = _mm256_set1_epi32(0x04000040);
  const __m256i second_fourth = _mm256_set1_epi32(0x003F03F0), up = _mm256_set1_epi32(0x01000010);
  // Sextet to character: an offset per range, found by a range number: 0
  // for 0-25 ('A'), 1 for 26-51 ('a'), 2-11 for 52-61 (digits), 12 for 62
  // ('+'), 13 for 63 ('/').
  const __m256i offsets = _mm256_setr_epi8(65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0,  //
                                           65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0);
  std::size_t done = 0;
  for (; done + 28 <= size; done += 24, out += 32) {
    const __m128i low = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done));
    const __m128i high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done + 12));
    const __m256i groups = _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(low), high, 1), spread);
    const __m256i sextets = _mm256_or_si256(_mm256_mulhi_epu16(_mm256_and_si256(groups, first_third), down),
                                            _mm256_mullo_epi16(_mm256_and_si256(groups, second_fourth), up));
    __m256i range = _mm256_subs_epu8(sextets, _mm256_set1_epi8(51));                       // 52-63: 1-12
    range = _mm256_sub_epi8(range, _mm256_cmpgt_epi8(sextets, _mm256_set1_epi8(25)));     // 26 and up: +1
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_add_epi8(sextets, _mm256_shuffle_epi8(offsets, range)));
  }
  return done;
}

// ---- decoding --------------------------------------------------------------

// 32 characters to 24 bytes per step, while every character is in the
// alphabet; returns the characters it decoded (a multiple of 32). It stops
// at a step with any other character ('=' included), which the scalar loop
// then reads and names, and 8 characters from the end, so that padding is
// never its to read and its 16-byte stores (4 bytes past the 12 they mean)
// stay inside the output.
__attribute__((target("avx2"))) std::size_t decode_avx2(const char* in, std::size_t size, unsigned char* out) {
  // A character is in the alphabet when its high nibble's class (one bit)
  // is not among the classes its low nibble rules out: 0x2_ holds only '+'
  // and '/' (B, F), 0x3_ digits (0-9), 0x4_ and 0x6_ letters (1-F), 0x5_
  // and 0x7_ letters (0-A); every other high nibble is ruled out by all.
  const __m256i ruled_out = _mm256_setr_epi8(0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A,
                                             0x1B, 0x1B, 0x1B, 0x1A,  //
                                             0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A,
                                             0x1B, 0x1B, 0x1B, 0x1A);
  const __m256i class_of = _mm256_setr_epi8(0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10,
                                            0x10, 0x10, 0x10, 0x10,  //
                                            0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10,
                                            0x10, 0x10, 0x10, 0x10);
  // Character to sextet: an offset per high nibble, '/' moved to entry 1.
  const __m256i offsets = _mm256_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                           0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
  // Four sextets to 24 bits: s0 * 64 + s1 and s2 * 64 + s3, then the first
  // pair * 4096 + the second; the three bytes come out last first.
  const __m256i pair = _mm256_set1_epi32(0x01400140), join = _mm256_set1_epi32(0x00011000);
  const __m256i pack = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1,  //
                                        2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  std::size_t done = 0;
  for (; done + 40 <= size; done += 32, out += 24) {
    const __m256i chars = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + done));
    const __m256i high = _mm256_and_si256(_mm256_srli_epi32(chars, 4), nibble);
    const __m256i outside = _mm256_and_si256(_mm256_shuffle_epi8(ruled_out, _mm256_and_si256(chars, nibble)),
                                             _mm256_shuffle_epi8(class_of, high));
    if (!_mm256_testz_si256(outside, outside)) break;
    const __m256i slash = _mm256_cmpeq_epi8(chars, _mm256_set1_epi8('/'));
    const __m256i sextets = _mm256_add_epi8(chars, _mm256_shuffle_epi8(offsets, _mm256_add_epi8(high, slash)));
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_madd_epi16(_mm256_maddubs_epi16(sextets, pair), join), pack);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(bytes));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 12), _mm256_extracti128_si256(bytes, 1));
  }
  return done;
}

Status not_base64(std::size_t at, char c) {
  return Status::invalid_argument(
      fmt::format("base64: character {} (byte 0x{:02X}) is outside the alphabet", at, static_cast<unsigned char>(c)));
}

}  // namespace

void append_base64(const void* data, std::size_t size, std::string& out) {
  const auto* in = static_cast<const unsigned char*>(data);
  const std::size_t first = out.size();
  out.resize(first + (size + 2) / 3 * 4);
  char* to = out.data() + first;
  std::size_t done = cpu_has_avx2() ? encode_avx2(in, size, to) : 0;
  const std::size_t groups = (size - done) / 3;
  encode_groups(in + done, groups, to + done / 3 * 4);
  done += groups * 3;
  if (done == size) return;
  char* last = to + done / 3 * 4;
  const std::uint32_t v = (std::uint32_t{in[done]} << 16) | (size - done == 2 ? std::uint32_t{in[done + 1]} << 8 : 0);
  last[0] = kAlphabet[v >> 18];
  last[1] = kAlphabet[(v >> 12) & 63];
  last[2] = size - done == 2 ? kAlphabet[(v >> 6) & 63] : '=';
  last[3] = '=';
}

Status base64_decode(std::string_view text, std::string& out) {
  out.clear();
  if (text.size() % 4 != 0) {
    return Status::invalid_argument(fmt::format("base64: {} characters, not a multiple of 4", text.size()));
  }
  out.resize(text.size() / 4 * 3);
  auto* to = reinterpret_cast<unsigned char*>(out.data());
  std::size_t done = cpu_has_avx2() ? decode_avx2(text.data(), text.size(), to) : 0;
  to += done / 4 * 3;
  for (; done < text.size(); done += 4) {
    const bool last_group = done + 4 == text.size();
    // '=' may end the last group only: "xx==" or "xxx=".
    const std::size_t padding = !last_group ? 0 : text[done + 3] != '=' ? 0 : text[done + 2] == '=' ? 2 : 1;
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4 - padding; ++k) {
      const std::int8_t sextet = kSextet.of[static_cast<unsigned char>(text[done + k])];
      if (sextet < 0) return not_base64(done + k, text[done + k]);
      v = v << 6 | static_cast<std::uint32_t>(sextet);
    }
    v <<= 6 * padding;
    *to++ = static_cast<unsigned char>(v >> 16);
    if (padding < 2) *to++ = static_cast<unsigned char>(v >> 8);
    if (padding < 1) *to++ = static_cast<unsigned char>(v);
  }
  out.resize(static_cast<std::size_t>(to - reinterpret_cast<unsigned char*>(out.data())));
  return Status::ok();
}

}  // namespace rapidqa
