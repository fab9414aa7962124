#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/wordpiece_tokenizer.h"

// Every expected token, id and offset below was produced by
// tests/reference/bert_tokenizer_reference.py, an independent Python
// re-implementation of Hugging Face's slow BertTokenizer (unicodedata, not
// utf8proc), on the same vocabulary and inputs; never by running this code.
// To regenerate: /usr/bin/python3 tests/reference/bert_tokenizer_reference.py
// and paste the block printed under the case's name.

using rapidqa::StatusCode;
using rapidqa::text::TokenizedText;
using rapidqa::text::WordPieceOptions;
using rapidqa::text::WordPieceTokenizer;
using namespace std::string_literals;

namespace {

using Offsets = std::vector<std::pair<std::size_t, std::size_t>>;

// Identical to VOCAB in the reference script: ids are positions.
const std::vector<std::string> kVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "a", "is", "i", "l", "of", "in", "un", "##aff", "##able",
    "##s", "##ly", "##ing", "##e", "##world", "hello", "world", "Hello",
    "cafe", "café", "Café", "naive", "naïve", "ecole", "école", "love",
    "bert", "token", "##izer", "##ize", "what", "where", "capital",
    "france", "paris", "question", "answer", "run", "##n", "mask", "5",
    "!", ",", ".", "?", "'", "-", "$", "(", ")", "[", "]",
    "我", "爱", "北", "京", "天", "安", "门", "中", "国", "，", "。", "？",
};

WordPieceTokenizer make(WordPieceOptions options = {}) {
  auto r = WordPieceTokenizer::from_tokens(kVocab, std::move(options));
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

WordPieceOptions cased() {
  WordPieceOptions o;
  o.lower_case = false;
  o.strip_accents = false;
  return o;
}

// Ids, offsets and the original text each offset cuts out.
struct Pieces {
  std::vector<std::int32_t> ids;
  Offsets offsets;
  std::vector<std::string> slices;
};

Pieces pieces(const WordPieceTokenizer& tokenizer, const std::string& text) {
  auto r = tokenizer.word_pieces(text);
  REQUIRE(r.is_ok());
  Pieces p;
  for (const auto& wp : r.value()) {
    p.ids.push_back(wp.id);
    p.offsets.emplace_back(wp.begin, wp.end);
    p.slices.push_back(text.substr(wp.begin, wp.end - wp.begin));
  }
  return p;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("rapidqa_wordpiece_" + name)).string();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

}  // namespace

TEST_CASE("WordPiece splits English words into the longest vocabulary pieces", "[wordpiece]") {
  const auto tok = make();
  // english
  const std::string text = "Hello, world! The question is unaffable.";
  CHECK(tok.tokenize(text) == std::vector<std::string>{"hello", ",", "world", "!", "the", "question", "is",
                                                       "un", "##aff", "##able", "."});
  const Pieces p = pieces(tok, text);
  CHECK(p.ids == std::vector<std::int32_t>{20, 47, 21, 46, 5, 40, 7, 12, 13, 14, 48});
  CHECK(p.offsets == Offsets{{0, 5}, {5, 6}, {7, 12}, {12, 13}, {14, 17}, {18, 26}, {27, 29}, {30, 32},
                             {32, 35}, {35, 39}, {39, 40}});
  CHECK(p.slices == std::vector<std::string>{"Hello", ",", "world", "!", "The", "question", "is", "un", "aff",
                                             "able", "."});

  // wordpieces
  const std::string words = "unaffable tokenizer tokenize runs running";
  CHECK(tok.tokenize(words) == std::vector<std::string>{"un", "##aff", "##able", "token", "##izer", "token",
                                                        "##ize", "run", "##s", "run", "##n", "##ing"});
  const Pieces w = pieces(tok, words);
  CHECK(w.ids == std::vector<std::int32_t>{12, 13, 14, 32, 33, 32, 34, 42, 15, 42, 43, 17});
  CHECK(w.offsets == Offsets{{0, 2}, {2, 5}, {5, 9}, {10, 15}, {15, 19}, {20, 25}, {25, 28}, {29, 32},
                             {32, 33}, {34, 37}, {37, 38}, {38, 41}});
}

TEST_CASE("WordPiece treats ASCII symbols and Unicode P categories as punctuation", "[wordpiece]") {
  const auto tok = make();
  // punctuation: "'s" has no "s" piece, so that word becomes [UNK]
  const std::string text = "$5 (run) the-world's";
  const Pieces p = pieces(tok, text);
  CHECK(p.ids == std::vector<std::int32_t>{52, 45, 53, 42, 54, 5, 51, 21, 50, 1});
  CHECK(p.offsets == Offsets{{0, 1}, {1, 2}, {3, 4}, {4, 7}, {7, 8}, {9, 12}, {12, 13}, {13, 18}, {18, 19},
                             {19, 20}});
}

TEST_CASE("WordPiece gives each Chinese character its own token", "[wordpiece]") {
  const auto tok = make();
  // chinese
  const std::string text = "我爱北京天安门";
  const Pieces p = pieces(tok, text);
  CHECK(p.ids == std::vector<std::int32_t>{57, 58, 59, 60, 61, 62, 63});
  CHECK(p.offsets == Offsets{{0, 3}, {3, 6}, {6, 9}, {9, 12}, {12, 15}, {15, 18}, {18, 21}});
  CHECK(p.slices == std::vector<std::string>{"我", "爱", "北", "京", "天", "安", "门"});

  // mixed: full-width comma is punctuation, CJK splits even without spaces
  const std::string mixed = "I love 北京，bert tokenizer!中国?";
  const Pieces m = pieces(tok, mixed);
  CHECK(tok.tokenize(mixed) == std::vector<std::string>{"i", "love", "北", "京", "，", "bert", "token",
                                                        "##izer", "!", "中", "国", "?"});
  CHECK(m.ids == std::vector<std::int32_t>{8, 30, 59, 60, 66, 31, 32, 33, 46, 64, 65, 49});
  CHECK(m.offsets == Offsets{{0, 1}, {2, 6}, {7, 10}, {10, 13}, {13, 16}, {16, 20}, {21, 26}, {26, 30},
                             {30, 31}, {31, 34}, {34, 37}, {37, 38}});
  CHECK(m.slices == std::vector<std::string>{"I", "love", "北", "京", "，", "bert", "token", "izer", "!", "中",
                                             "国", "?"});
}

TEST_CASE("WordPiece lower-casing strips accents unless told otherwise", "[wordpiece]") {
  const std::string text = "Café naïve";
  // accents_uncased
  CHECK(pieces(make(), text).ids == std::vector<std::int32_t>{23, 26});
  CHECK(pieces(make(), text).offsets == Offsets{{0, 5}, {6, 12}});
  // accents_cased
  CHECK(pieces(make(cased()), text).ids == std::vector<std::int32_t>{25, 27});
  // accents_lower_keep
  WordPieceOptions keep;
  keep.strip_accents = false;
  CHECK(pieces(make(keep), text).ids == std::vector<std::int32_t>{24, 27});
  // accents_cased_strip: "Cafe" is not in the vocabulary
  WordPieceOptions strip_only = cased();
  strip_only.strip_accents = true;
  CHECK(pieces(make(strip_only), text).ids == std::vector<std::int32_t>{1, 26});
}

TEST_CASE("WordPiece composes decomposed accents (NFC) before matching", "[wordpiece]") {
  const std::string text = "Cafe\xCC\x81 nai\xCC\x88ve";  // e + U+0301, i + U+0308
  // decomposed_uncased
  const Pieces u = pieces(make(), text);
  CHECK(u.ids == std::vector<std::int32_t>{23, 26});
  CHECK(u.offsets == Offsets{{0, 6}, {7, 14}});
  // decomposed_cased
  const Pieces c = pieces(make(cased()), text);
  CHECK(c.ids == std::vector<std::int32_t>{25, 27});
  CHECK(c.offsets == Offsets{{0, 6}, {7, 14}});
}

TEST_CASE("WordPiece offsets slice the original text after case and accent changes", "[wordpiece]") {
  // ecole
  const std::string text = "À l'ÉCOLE";
  const Pieces p = pieces(make(), text);
  CHECK(p.ids == std::vector<std::int32_t>{6, 9, 50, 28});
  CHECK(p.offsets == Offsets{{0, 2}, {3, 4}, {4, 5}, {5, 11}});
  CHECK(p.slices == std::vector<std::string>{"À", "l", "'", "ÉCOLE"});

  // dotted_capital_i: Python lower-cases U+0130 to "i" + U+0307
  const Pieces i = pieces(make(), "İ love");
  CHECK(i.ids == std::vector<std::int32_t>{8, 30});
  CHECK(i.offsets == Offsets{{0, 2}, {3, 7}});
  // dotted_capital_i_keep_accents: the kept U+0307 has no piece
  WordPieceOptions keep;
  keep.strip_accents = false;
  CHECK(pieces(make(keep), "İ love").ids == std::vector<std::int32_t>{1, 30});
}

TEST_CASE("WordPiece maps unknown emoji words to UNK covering the whole word", "[wordpiece]") {
  // emoji
  const std::string text = "hello 😀 world hello😀";
  const Pieces p = pieces(make(), text);
  CHECK(p.ids == std::vector<std::int32_t>{20, 1, 21, 1});
  CHECK(p.offsets == Offsets{{0, 5}, {6, 10}, {11, 16}, {17, 26}});
  CHECK(p.slices == std::vector<std::string>{"hello", "😀", "world", "hello😀"});
}

TEST_CASE("WordPiece drops control and format characters and splits on Unicode spaces", "[wordpiece]") {
  // control: NUL, BEL, zero-width space (Cf), U+FFFD and ESC vanish
  const std::string text = "hel\x00lo\x07 wor\xE2\x80\x8Bld\xEF\xBF\xBD \x1B[5"s;
  const Pieces p = pieces(make(), text);
  CHECK(p.ids == std::vector<std::int32_t>{20, 21, 55, 45});
  CHECK(p.offsets == Offsets{{0, 6}, {8, 16}, {21, 22}, {22, 23}});
  CHECK(p.slices == std::vector<std::string>{"hel\x00lo"s, "wor\xE2\x80\x8Bld", "[", "5"});

  // whitespace: tab, no-break space, ideographic space, CRLF, U+2028, U+2029
  const std::string spaces =
      "\thello\xC2\xA0world\xE3\x80\x80the\r\nworld\xE2\x80\xA8is\xE2\x80\xA9" "a";
  const Pieces s = pieces(make(), spaces);
  CHECK(s.ids == std::vector<std::int32_t>{20, 21, 5, 21, 7, 6});
  CHECK(s.offsets == Offsets{{1, 6}, {8, 13}, {16, 19}, {21, 26}, {29, 31}, {34, 35}});
}

TEST_CASE("WordPiece keeps special tokens written in the text whole", "[wordpiece]") {
  // specials: only the exact upper-case spelling is special
  const std::string text = "[MASK] is a [UNK] hello[SEP]world [mask] [CLS";
  const Pieces p = pieces(make(), text);
  CHECK(make().tokenize(text) == std::vector<std::string>{"[MASK]", "is", "a", "[UNK]", "hello", "[SEP]", "world",
                                                          "[", "mask", "]", "[", "[UNK]"});
  CHECK(p.ids == std::vector<std::int32_t>{4, 7, 6, 1, 20, 3, 21, 55, 44, 56, 55, 1});
  CHECK(p.offsets == Offsets{{0, 6}, {7, 9}, {10, 11}, {12, 17}, {18, 23}, {23, 28}, {28, 33}, {34, 35},
                             {35, 39}, {39, 40}, {41, 42}, {42, 45}});
  // specials_cased
  const Pieces c = pieces(make(cased()), "[MASK] Hello[PAD]");
  CHECK(c.ids == std::vector<std::int32_t>{4, 22, 0});
  CHECK(c.offsets == Offsets{{0, 6}, {7, 12}, {12, 17}});
  // special_after_cleaning: the zero-width space goes, then "[CLS]" is never split
  const Pieces z = pieces(make(cased()), "[CLS\xE2\x80\x8B]");
  CHECK(z.ids == std::vector<std::int32_t>{2});
  CHECK(z.offsets == Offsets{{0, 8}});
}

TEST_CASE("WordPiece basic_tokens gives the normalised words before WordPiece", "[wordpiece]") {
  // basic_tokens: the reference's _basic() words, specials cut out first.
  // Words the vocabulary lacks ("naive" is there, "stop" is not) come out
  // all the same: this is what a vocabulary builder needs.
  const std::string text = "Caf\xC3\xA9 NA\xC3\x8FVE, \xE6\x88\x91\xE7\x88\xB1\xE5\x8C\x97\xE4\xBA\xAC! [MASK]don't\xE2\x80\x8B\tstop\xC2\xA0\xC4\xB0";
  auto words = make().basic_tokens(text);
  REQUIRE(words.is_ok());
  CHECK(words.value() == std::vector<std::string>{"cafe", "naive", ",", "\xE6\x88\x91", "\xE7\x88\xB1",
                                                  "\xE5\x8C\x97", "\xE4\xBA\xAC", "!", "[MASK]", "don", "'", "t",
                                                  "stop", "i"});
  CHECK(make().basic_tokens("bad \xFF").status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("WordPiece turns words over max_input_chars_per_word into UNK", "[wordpiece]") {
  // long_word_default: 101 characters against the default limit of 100
  const std::string text = std::string(101, 'a') + " hello";
  const Pieces p = pieces(make(), text);
  CHECK(p.ids == std::vector<std::int32_t>{1, 20});
  CHECK(p.offsets == Offsets{{0, 101}, {102, 107}});
  // long_word_short_limit: 9 characters pass, 10 do not
  WordPieceOptions short_words;
  short_words.max_input_chars_per_word = 9;
  const Pieces s = pieces(make(short_words), "unaffable unaffables");
  CHECK(s.ids == std::vector<std::int32_t>{12, 13, 14, 1});
  CHECK(s.offsets == Offsets{{0, 2}, {2, 5}, {5, 9}, {10, 20}});
}

TEST_CASE("WordPiece encode wraps one text in CLS and SEP and truncates it", "[wordpiece]") {
  const auto tok = make();
  // encode
  auto r = tok.encode("Hello, world!", 32);
  REQUIRE(r.is_ok());
  CHECK(r->input_ids == std::vector<std::int32_t>{2, 20, 47, 21, 46, 3});
  CHECK(r->token_type_ids == std::vector<std::int32_t>{0, 0, 0, 0, 0, 0});
  CHECK(r->attention_mask == std::vector<std::int32_t>{1, 1, 1, 1, 1, 1});
  CHECK(r->sequence_ids == std::vector<std::int8_t>{-1, 0, 0, 0, 0, -1});
  CHECK(r->offsets == Offsets{{0, 0}, {0, 5}, {5, 6}, {7, 12}, {12, 13}, {0, 0}});
  CHECK(r->truncated_tokens == 0);

  // encode_truncated
  auto t = tok.encode("Hello, world! The question", 5);
  REQUIRE(t.is_ok());
  CHECK(t->input_ids == std::vector<std::int32_t>{2, 20, 47, 21, 3});
  CHECK(t->sequence_ids == std::vector<std::int8_t>{-1, 0, 0, 0, -1});
  CHECK(t->offsets == Offsets{{0, 0}, {0, 5}, {5, 6}, {7, 12}, {0, 0}});
  CHECK(t->truncated_tokens == 3);

  // empty
  auto e = tok.encode("", 8);
  REQUIRE(e.is_ok());
  CHECK(e->input_ids == std::vector<std::int32_t>{2, 3});
  CHECK(e->offsets == Offsets{{0, 0}, {0, 0}});
}

TEST_CASE("WordPiece encode_pair sets token types and per-text offsets", "[wordpiece]") {
  // pair
  const std::string question = "What is the capital of France?";
  const std::string passage = "Paris is the capital of France.";
  auto r = make().encode_pair(question, passage, 64);
  REQUIRE(r.is_ok());
  CHECK(r->input_ids == std::vector<std::int32_t>{2, 35, 7, 5, 37, 10, 38, 49, 3, 39, 7, 5, 37, 10, 38, 48, 3});
  CHECK(r->token_type_ids == std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1});
  CHECK(r->sequence_ids == std::vector<std::int8_t>{-1, 0, 0, 0, 0, 0, 0, 0, -1, 1, 1, 1, 1, 1, 1, 1, -1});
  CHECK(r->offsets == Offsets{{0, 0}, {0, 4}, {5, 7}, {8, 11}, {12, 19}, {20, 22}, {23, 29}, {29, 30}, {0, 0},
                              {0, 5}, {6, 8}, {9, 12}, {13, 20}, {21, 23}, {24, 30}, {30, 31}, {0, 0}});
  CHECK(r->attention_mask == std::vector<std::int32_t>(17, 1));
  // The reader cuts answers out of the passage with the offsets of segment 1.
  CHECK(passage.substr(r->offsets[9].first, r->offsets[9].second - r->offsets[9].first) == "Paris");
}

TEST_CASE("WordPiece encode_pair truncates the longer text first and the second on ties", "[wordpiece]") {
  const auto tok = make();
  const std::string first = "what is the capital of france ?";  // 7 tokens
  const std::string second = "paris is the capital";            // 4 tokens
  // pair_trunc_first: 14 > 11, three tokens come off the first text only
  auto a = tok.encode_pair(first, second, 11);
  REQUIRE(a.is_ok());
  CHECK(a->input_ids == std::vector<std::int32_t>{2, 35, 7, 5, 37, 3, 39, 7, 5, 37, 3});
  CHECK(a->token_type_ids == std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  CHECK(a->offsets == Offsets{{0, 0}, {0, 4}, {5, 7}, {8, 11}, {12, 19}, {0, 0}, {0, 5}, {6, 8}, {9, 12},
                              {13, 20}, {0, 0}});
  CHECK(a->truncated_tokens == 3);
  // pair_trunc_both: once equal, the two texts lose tokens in turn
  auto b = tok.encode_pair(first, second, 8);
  REQUIRE(b.is_ok());
  CHECK(b->input_ids == std::vector<std::int32_t>{2, 35, 7, 5, 3, 39, 7, 3});
  CHECK(b->token_type_ids == std::vector<std::int32_t>{0, 0, 0, 0, 0, 1, 1, 1});
  CHECK(b->sequence_ids == std::vector<std::int8_t>{-1, 0, 0, 0, -1, 1, 1, -1});
  CHECK(b->offsets == Offsets{{0, 0}, {0, 4}, {5, 7}, {8, 11}, {0, 0}, {0, 5}, {6, 8}, {0, 0}});
  // pair_trunc_tie
  auto c = tok.encode_pair("hello world", "the world", 6);
  REQUIRE(c.is_ok());
  CHECK(c->input_ids == std::vector<std::int32_t>{2, 20, 21, 3, 5, 3});
  CHECK(c->token_type_ids == std::vector<std::int32_t>{0, 0, 0, 0, 1, 1});
}

TEST_CASE("WordPiece refuses invalid UTF-8 and a max_length without room for specials", "[wordpiece]") {
  const auto tok = make();
  auto bad = tok.encode("abc\xFF" "def", 16);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("offset 3"));

  auto bad_second = tok.encode_pair("fine", "ok\xC3", 16);
  REQUIRE_FALSE(bad_second.is_ok());
  CHECK_THAT(bad_second.status().message(), Catch::Contains("second") && Catch::Contains("offset 2"));

  auto short_single = tok.encode("hello", 1);
  REQUIRE_FALSE(short_single.is_ok());
  CHECK(short_single.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(short_single.status().message(), Catch::Contains("max_length"));
  CHECK(tok.encode("hello", 2).is_ok());

  auto short_pair = tok.encode_pair("a", "b", 2);
  REQUIRE_FALSE(short_pair.is_ok());
  CHECK_THAT(short_pair.status().message(), Catch::Contains("max_length"));
  auto just_specials = tok.encode_pair("a", "b", 3);
  REQUIRE(just_specials.is_ok());
  CHECK(just_specials->input_ids == std::vector<std::int32_t>{2, 3, 3});
}

TEST_CASE("WordPiece vocabulary errors name the token file and line", "[wordpiece]") {
  auto missing = WordPieceTokenizer::from_vocab_file("/nonexistent/rapidqa/vocab.txt");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/rapidqa/vocab.txt"));

  const std::string empty_path = temp_path("empty_vocab.txt");
  write_file(empty_path, "");
  auto empty = WordPieceTokenizer::from_vocab_file(empty_path);
  REQUIRE_FALSE(empty.is_ok());
  CHECK(empty.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(empty.status().message(), Catch::Contains("empty"));
  CHECK_FALSE(WordPieceTokenizer::from_tokens({}).is_ok());

  auto no_cls = WordPieceTokenizer::from_tokens({"[PAD]", "[UNK]", "[SEP]", "hello"});
  REQUIRE_FALSE(no_cls.is_ok());
  CHECK_THAT(no_cls.status().message(), Catch::Contains("'[CLS]'"));

  const std::string dup_path = temp_path("dup_vocab.txt");
  write_file(dup_path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\nhello\n");
  auto dup = WordPieceTokenizer::from_vocab_file(dup_path);
  REQUIRE_FALSE(dup.is_ok());
  CHECK(dup.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(dup.status().message(), Catch::Contains("line 7") && Catch::Contains("'hello'") &&
                                         Catch::Contains("line 5") && Catch::Contains(dup_path));
  std::remove(empty_path.c_str());
  std::remove(dup_path.c_str());
}

TEST_CASE("WordPiece reads vocab.txt with any line ending", "[wordpiece]") {
  std::string lf, crlf;
  for (const std::string& t : kVocab) {
    lf += t + "\n";
    crlf += t + "\r\n";
  }
  for (const std::string& content : {lf, crlf}) {
    const std::string path = temp_path("vocab.txt");
    write_file(path, content);
    auto r = WordPieceTokenizer::from_vocab_file(path);
    std::remove(path.c_str());
    REQUIRE(r.is_ok());
    CHECK(r->vocab_size() == kVocab.size());
    CHECK(r->pad_id() == 0);
    CHECK(r->unk_id() == 1);
    CHECK(r->cls_id() == 2);
    CHECK(r->sep_id() == 3);
    CHECK(r->token_to_id("##aff") == 13);
    CHECK(r->token_to_id("missing") == -1);
    CHECK(r->id_to_token(63) == "门");
    CHECK(r->id_to_token(100000) == "[UNK]");
    CHECK(pieces(r.value(), "Hello, world! The question is unaffable.").ids ==
          std::vector<std::int32_t>{20, 47, 21, 46, 5, 40, 7, 12, 13, 14, 48});
  }
}

TEST_CASE("WordPiece loads a Hugging Face tokenizer.json", "[wordpiece]") {
  nlohmann::json vocab = nlohmann::json::object();
  for (std::size_t i = 0; i < kVocab.size(); ++i) vocab[kVocab[i]] = i;
  nlohmann::json added = nlohmann::json::array();
  for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    added.push_back({{"id", std::find(kVocab.begin(), kVocab.end(), special) - kVocab.begin()},
                     {"content", special}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  auto special = [](const char* id, int type) { return nlohmann::json{{"SpecialToken", {{"id", id}, {"type_id", type}}}}; };
  auto sequence = [](const char* id, int type) { return nlohmann::json{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
  nlohmann::json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                      {"strip_accents", nullptr}, {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)}},
        {"pair", {special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0), sequence("B", 1), special("[SEP]", 1)}},
        {"special_tokens", nlohmann::json::object()}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                 {"max_input_chars_per_word", 100}, {"vocab", vocab}}},
  };
  const std::string path = temp_path("tokenizer.json");

  SECTION("uncased") {
    write_file(path, root.dump());
    auto r = WordPieceTokenizer::from_tokenizer_json(path);
    REQUIRE(r.is_ok());
    CHECK(r->vocab_size() == kVocab.size());
    // english, mixed, accents_uncased and specials from the reference
    CHECK(pieces(r.value(), "Hello, world! The question is unaffable.").ids ==
          std::vector<std::int32_t>{20, 47, 21, 46, 5, 40, 7, 12, 13, 14, 48});
    CHECK(pieces(r.value(), "I love 北京，bert tokenizer!中国?").ids ==
          std::vector<std::int32_t>{8, 30, 59, 60, 66, 31, 32, 33, 46, 64, 65, 49});
    CHECK(pieces(r.value(), "Café naïve").ids == std::vector<std::int32_t>{23, 26});
    CHECK(pieces(r.value(), "[MASK] is a [UNK] hello[SEP]world [mask] [CLS").ids ==
          std::vector<std::int32_t>{4, 7, 6, 1, 20, 3, 21, 55, 44, 56, 55, 1});
  }
  SECTION("cased with a short word limit") {
    root["normalizer"]["lowercase"] = false;
    root["model"]["max_input_chars_per_word"] = 9;
    write_file(path, root.dump());
    auto r = WordPieceTokenizer::from_tokenizer_json(path);
    REQUIRE(r.is_ok());
    CHECK(pieces(r.value(), "Café naïve").ids == std::vector<std::int32_t>{25, 27});  // accents_cased
    CHECK(pieces(r.value(), "unaffable unaffables").ids == std::vector<std::int32_t>{12, 13, 14, 1});
  }
  SECTION("errors name the field") {
    std::string field;
    SECTION("model type") {
      root["model"]["type"] = "BPE";
      field = "model.type";
    }
    SECTION("normalizer type") {
      root["normalizer"] = {{"type", "Lowercase"}};
      field = "normalizer.type";
    }
    SECTION("normalizer setting") {
      root["normalizer"]["lowercase"] = "yes";
      field = "normalizer.lowercase";
    }
    SECTION("vocab id") {
      root["model"]["vocab"]["hello"] = 5000;
      field = "model.vocab";
    }
    SECTION("pre_tokenizer") {
      root["pre_tokenizer"] = {{"type", "Whitespace"}};
      field = "pre_tokenizer.type";
    }
    SECTION("added token") {
      root["added_tokens"][0]["id"] = 7;
      field = "added_tokens[0]";
    }
    write_file(path, root.dump());
    auto r = WordPieceTokenizer::from_tokenizer_json(path);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(field) && Catch::Contains(path));
  }
  std::remove(path.c_str());

  auto missing = WordPieceTokenizer::from_tokenizer_json("/nonexistent/rapidqa/tokenizer.json");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
}
