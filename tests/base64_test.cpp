// The base64 codec against OpenSSL's (the reference it replaced). Every
// length from 0 to 300 covers the AVX2 loops' edges and the scalar loop,
// which short inputs and every tail take.
#include <openssl/evp.h>

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "rapidqa/base64.h"

namespace {

std::string openssl_base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

}  // namespace

TEST_CASE("base64 encodes as OpenSSL does and decodes back, at every length", "[base64]") {
  std::mt19937 rng(7);
  for (std::size_t n = 0; n <= 300; ++n) {
    const std::string bytes = random_bytes(rng, n);
    std::string encoded = "prefix:";
    rapidqa::append_base64(bytes.data(), bytes.size(), encoded);
    REQUIRE(encoded == "prefix:" + openssl_base64(bytes));
    std::string decoded = "old contents";
    REQUIRE(rapidqa::base64_decode(std::string_view(encoded).substr(7), decoded).is_ok());
    REQUIRE(decoded == bytes);
  }
  // A batch of vectors' worth, and every byte value.
  const std::string large = random_bytes(rng, 64 * 384 * 4);
  std::string encoded;
  rapidqa::append_base64(large.data(), large.size(), encoded);
  REQUIRE(encoded == openssl_base64(large));
  std::string decoded;
  REQUIRE(rapidqa::base64_decode(encoded, decoded).is_ok());
  REQUIRE(decoded == large);
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  encoded.clear();
  rapidqa::append_base64(all.data(), all.size(), encoded);
  REQUIRE(rapidqa::base64_decode(encoded, decoded).is_ok());
  REQUIRE(decoded == all);
}

TEST_CASE("base64 refuses what is not base64 and names where", "[base64]") {
  std::mt19937 rng(11);
  std::string text;
  rapidqa::append_base64(random_bytes(rng, 96).data(), 96, text);  // 128 characters, no padding
  std::string out;
  // Every character outside the alphabet, at every position (the vector
  // loop's steps and the scalar tail alike), is found and named.
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int c = 0; c < 256; ++c) {
    if (alphabet.find(static_cast<char>(c)) != std::string::npos) continue;
    for (std::size_t at : {std::size_t{0}, std::size_t{31}, std::size_t{33}, std::size_t{100}, std::size_t{127}}) {
      std::string bad = text;
      bad[at] = static_cast<char>(c);
      const rapidqa::Status s = rapidqa::base64_decode(bad, out);
      if (c == '=' && at == 127) {
        REQUIRE(s.is_ok());  // one '=' ending the text is padding
        continue;
      }
      REQUIRE(s.code() == rapidqa::StatusCode::kInvalidArgument);
      REQUIRE(s.message().find("character " + std::to_string(at) + " ") != std::string::npos);
    }
  }
  REQUIRE(rapidqa::base64_decode("QUJD", out).is_ok());
  REQUIRE(out == "ABC");
  REQUIRE(rapidqa::base64_decode("QUI=", out).is_ok());
  REQUIRE(out == "AB");
  REQUIRE(rapidqa::base64_decode("QQ==", out).is_ok());
  REQUIRE(out == "A");
  REQUIRE(rapidqa::base64_decode("", out).is_ok());
  REQUIRE(out.empty());
  REQUIRE(rapidqa::base64_decode("QUJ", out).message().find("not a multiple of 4") != std::string::npos);
  REQUIRE_FALSE(rapidqa::base64_decode("Q===", out).is_ok());
  REQUIRE_FALSE(rapidqa::base64_decode("QQ==QUJD", out).is_ok());  // padding inside
  REQUIRE_FALSE(rapidqa::base64_decode("QQ=A", out).is_ok());
  REQUIRE_FALSE(rapidqa::base64_decode("QUJD\n", out).is_ok());
}
