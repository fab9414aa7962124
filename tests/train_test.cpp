// Training (src/train/): the FAQ split and its retrieval measure, the
// vocabulary, the LibTorch BERT module against our runtime, the contrastive
// trainer, and the model rapidqa-train writes for the later tests (the
// trained_model fixture, RAPIDQA_TRAINED_MODEL).
// LibTorch first: it pulls in glog, whose CHECK macro Catch must override.
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "model/model_bundle.h"
#include "model/pooling.h"
#include "model/transformer_model.h"
#include "rapidqa/knowledge_file.h"
#include "rapidqa/transformer_encoder.h"
#include "train/contrastive_trainer.h"
#include "train/faq_split.h"
#include "train/trainable_bert.h"
#include "train/vocabulary_builder.h"

namespace fs = std::filesystem;
namespace train = rapidqa::train;
using rapidqa::model::TransformerConfig;

namespace {

const std::string kFaq = std::string(RAPIDQA_SOURCE_DIR) + "/examples/data/faq.jsonl";

const std::vector<rapidqa::KnowledgeEntry>& faq() {
  static const std::vector<rapidqa::KnowledgeEntry> entries = [] {
    auto file = rapidqa::read_knowledge_file(kFaq);
    REQUIRE(file.is_ok());
    return file->entries;
  }();
  return entries;
}

std::vector<std::string> faq_texts() {
  std::vector<std::string> texts;
  for (const auto& e : faq()) {
    texts.push_back(e.question);
    texts.insert(texts.end(), e.alternates.begin(), e.alternates.end());
    texts.push_back(e.answer);
  }
  return texts;
}

std::shared_ptr<const rapidqa::text::WordPieceTokenizer> faq_tokenizer() {
  static const auto tokenizer = [] {
    auto vocabulary = train::build_wordpiece_vocabulary(faq_texts());
    REQUIRE(vocabulary.is_ok());
    auto t = train::tokenizer_for(vocabulary.value(), true);
    REQUIRE(t.is_ok());
    return std::make_shared<const rapidqa::text::WordPieceTokenizer>(std::move(t).value());
  }();
  return tokenizer;
}

TransformerConfig small_config(std::int64_t hidden = 32, std::int64_t layers = 2, std::int64_t heads = 4,
                               std::int64_t intermediate = 64) {
  TransformerConfig c;
  c.vocab_size = static_cast<std::int64_t>(faq_tokenizer()->vocab_size());
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.intermediate_size = intermediate;
  c.max_position_embeddings = 64;
  return c;
}

// A model whose every parameter is random, LayerNorms included: with
// BERT's initial LayerNorm (1 and 0) a swapped weight and bias would pass.
std::shared_ptr<train::TrainableBert> random_model(const TransformerConfig& config, std::uint64_t seed = 7) {
  train::TrainableBertOptions options;
  options.seed = seed;
  auto model = train::TrainableBert::create(config, options);
  REQUIRE(model.is_ok());
  torch::NoGradGuard no_grad;
  for (auto& p : (*model)->parameters()) p.add_(torch::randn_like(p) * 0.2);
  (*model)->eval();
  return model.value();
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a - b).abs().max().item<double>();
}

const std::vector<std::string> kTexts = {"How do I reset my password?", "如何重置密码？",
                                         "Where is my order, it was shipped last week", "退货"};

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("rapidqa-train-test-" + name);
  fs::remove_all(dir);
  return dir;
}

train::FaqSplit faq_split(std::uint64_t seed = 1) {
  train::FaqSplitOptions options;
  options.seed = seed;
  auto split = train::split_faq(faq(), options);
  REQUIRE(split.is_ok());
  return split.value();
}

train::ContrastiveOptions short_run(std::size_t epochs) {
  train::ContrastiveOptions o;
  o.epochs = epochs;
  o.evaluate_every = 0;
  o.learning_rate = 1e-3;
  return o;
}

}  // namespace

TEST_CASE("The FAQ split is deterministic, disjoint and holds one alternate of each entry back", "[train]") {
  const train::FaqSplit split = faq_split();
  const train::FaqSplit again = faq_split();
  REQUIRE(split.entry_ids.size() == faq().size());
  REQUIRE(split.held_back.size() == faq().size());  // every FAQ entry has alternates
  std::set<std::string> training, held_back;
  for (const auto& p : split.training) training.insert(p.text);
  for (const auto& p : split.held_back) held_back.insert(p.text);
  std::size_t phrasings = 0;
  for (const auto& e : faq()) phrasings += 1 + e.alternates.size();
  CHECK(training.size() + held_back.size() == phrasings);
  for (const auto& text : held_back) CHECK(training.count(text) == 0);
  for (std::size_t i = 0; i < split.held_back.size(); ++i) {
    const auto& entry = faq()[split.held_back[i].entry];
    INFO(entry.id);
    CHECK(split.held_back[i].entry == i);  // one per entry, in file order
    CHECK(split.held_back[i].text != entry.question);  // the question always trains
    CHECK(split.held_back[i].text == again.held_back[i].text);
  }
  CHECK(split.companions.size() == faq().size());
  CHECK(split.companions.front().text == faq().front().answer);

  const train::FaqSplit other = faq_split(2);
  std::size_t moved = 0;
  for (std::size_t i = 0; i < split.held_back.size(); ++i) moved += split.held_back[i].text != other.held_back[i].text;
  CHECK(moved > 0);
}

TEST_CASE("The FAQ split refuses what retrieval could not score", "[train]") {
  CHECK(train::split_faq({}).status().code() == rapidqa::StatusCode::kInvalidArgument);
  rapidqa::KnowledgeEntry a{"a", "How do I pay?", {"payment options"}, "Card.", "", {}, 0, {}};
  rapidqa::KnowledgeEntry b{"b", "Where is my parcel?", {"payment options"}, "Tracking.", "", {}, 0, {}};
  auto shared = train::split_faq({a, b});
  REQUIRE_FALSE(shared.is_ok());
  CHECK(shared.status().message().find("'payment options' belongs to both 'a' and 'b'") != std::string::npos);
  // An entry with only its question trains and is indexed, but asks nothing.
  rapidqa::KnowledgeEntry lone{"c", "Opening hours?", {}, "9 to 5.", "", {}, 0, {}};
  auto split = train::split_faq({a, lone});
  REQUIRE(split.is_ok());
  CHECK(split->held_back.size() == 1);
  CHECK(split->training.size() == 2);
}

TEST_CASE("top1_accuracy counts a query right when its nearest training phrasing is of its entry", "[train]") {
  train::FaqSplit split;
  split.entry_ids = {"x", "y"};
  split.training = {{"x1", 0}, {"y1", 1}};
  split.held_back = {{"x2", 0}, {"y2", 1}, {"y3", 1}};
  // Unnormalised on purpose: the measure is cosine, not dot product.
  const std::map<std::string, std::vector<float>> vectors = {
      {"x1", {10, 0}}, {"y1", {0, 1}}, {"x2", {1, 0.2f}}, {"y2", {0.1f, 3}}, {"y3", {1, 0.5f}}};
  const train::EncodeFn encode = [&](const std::vector<std::string>& texts, std::vector<float>& out) {
    out.clear();
    for (const auto& t : texts) out.insert(out.end(), vectors.at(t).begin(), vectors.at(t).end());
    return rapidqa::Status::ok();
  };
  auto accuracy = train::top1_accuracy(encode, split);
  REQUIRE(accuracy.is_ok());
  CHECK(accuracy->queries == 3);
  CHECK(accuracy->correct == 2);  // y3 lies nearer x1
  CHECK(accuracy->top1() == Approx(2.0 / 3.0));

  const train::EncodeFn ragged = [](const std::vector<std::string>& texts, std::vector<float>& out) {
    out.assign(texts.size() * 2 + 1, 0.0f);
    return rapidqa::Status::ok();
  };
  CHECK(train::top1_accuracy(ragged, split).status().code() == rapidqa::StatusCode::kInvalidArgument);
  const train::EncodeFn failing = [](const std::vector<std::string>&, std::vector<float>&) {
    return rapidqa::Status::unavailable("model server down");
  };
  CHECK(train::top1_accuracy(failing, split).status().message() == "model server down");
}

TEST_CASE("The vocabulary spells the whole FAQ without [UNK], in fixed ids", "[train]") {
  const auto texts = faq_texts();
  auto vocabulary = train::build_wordpiece_vocabulary(texts);
  REQUIRE(vocabulary.is_ok());
  CHECK(std::vector<std::string>(vocabulary->begin(), vocabulary->begin() + 5) == train::special_tokens());
  CHECK(vocabulary.value() == train::build_wordpiece_vocabulary(texts).value());
  const auto& tokenizer = *faq_tokenizer();
  CHECK(tokenizer.pad_id() == 0);
  CHECK(tokenizer.unk_id() == 1);
  for (const auto& text : texts) {
    auto ids = tokenizer.encode(text, 512);
    REQUIRE(ids.is_ok());
    INFO(text);
    CHECK(std::count(ids->input_ids.begin(), ids->input_ids.end(), tokenizer.unk_id()) == 0);
  }
  // Whole words stay whole; a word the FAQ never uses is spelled from its
  // characters rather than lost.
  CHECK(tokenizer.tokenize("Reset your PASSWORD") == std::vector<std::string>{"reset", "your", "password"});
  const auto spelled = tokenizer.tokenize("passwordx");
  CHECK(spelled.size() > 1);
  CHECK(std::find(spelled.begin(), spelled.end(), "[UNK]") == spelled.end());
  // Rare words left to characters when asked.
  train::VocabularyOptions frequent_only;
  frequent_only.min_word_count = 1000000;
  auto characters = train::build_wordpiece_vocabulary(texts, frequent_only);
  REQUIRE(characters.is_ok());
  CHECK(characters->size() < vocabulary->size());
  CHECK(train::build_wordpiece_vocabulary({"ok", "bad \xff"}).status().message().find("text 1") == 0);
}

TEST_CASE("Sub-word merges give the forms of a word shared pieces", "[train]") {
  const std::vector<std::string> texts = {"Return", "return it", "returns", "returned"};
  train::VocabularyOptions options;
  options.subword_merges = 100;
  auto vocabulary = train::build_wordpiece_vocabulary(texts, options);
  REQUIRE(vocabulary.is_ok());
  // Every pair inside r-e-t-u-r-n is seen four times (ties go to the pair
  // that sorts first, "##" before letters); nothing after "return" is seen
  // twice, so learning stops there, well short of 100.
  const std::vector<std::string> learned(vocabulary->end() - 5, vocabulary->end());
  CHECK(learned == std::vector<std::string>{"##et", "##etu", "##etur", "##eturn", "return"});
  auto tokenizer = train::tokenizer_for(vocabulary.value(), true);
  REQUIRE(tokenizer.is_ok());
  CHECK(tokenizer->tokenize("returns returned") == std::vector<std::string>{"return", "##s", "return", "##e", "##d"});
  CHECK(tokenizer->tokenize("tire") == std::vector<std::string>{"t", "##i", "##r", "##e"});
  options.subword_merges = 2;
  auto two = train::build_wordpiece_vocabulary(texts, options);
  REQUIRE(two.is_ok());
  CHECK(std::vector<std::string>(two->end() - 2, two->end()) == std::vector<std::string>{"##et", "##etu"});
  CHECK(two->size() == vocabulary->size() - 3);
}

TEST_CASE("TrainableBert's exported tensors run in our runtime with the same outputs", "[train]") {
  const TransformerConfig config = small_config();
  const auto model = random_model(config);
  const auto tensors = model->export_tensors();
  CHECK(tensors.count("embeddings.word_embeddings.weight") == 1);
  CHECK(tensors.count("encoder.layer.1.attention.self.query.weight") == 1);
  CHECK(tensors.count("encoder.layer.1.attention.output.LayerNorm.bias") == 1);
  CHECK(tensors.count("encoder.layer.0.intermediate.dense.weight") == 1);
  CHECK(tensors.count("encoder.layer.0.output.dense.bias") == 1);
  CHECK(static_cast<std::int64_t>(tensors.size()) == 5 + 16 * config.num_layers);
  CHECK(tensors.at("encoder.layer.0.intermediate.dense.weight").sizes() == at::IntArrayRef({64, 32}));

  auto runtime = rapidqa::model::build_transformer(config, tensors, "exported");
  REQUIRE(runtime.is_ok());
  auto inputs = train::make_inputs(*faq_tokenizer(), kTexts, 64);  // padded: lengths differ
  REQUIRE(inputs.is_ok());
  torch::NoGradGuard no_grad;
  const at::Tensor ours = (*runtime)->forward(inputs.value());
  const at::Tensor theirs = model->forward(inputs.value());
  // Compared at tokens: the runtime leaves padding positions at zero.
  const at::Tensor token = inputs->attention_mask.to(at::kFloat).unsqueeze(-1);
  CHECK(max_abs_diff(ours, theirs * token) < 1e-4);
  const at::Tensor pooled =
      rapidqa::model::pool_hidden(ours, inputs->attention_mask, rapidqa::Pooling::kMean, /*normalize=*/true);
  CHECK(max_abs_diff(pooled, model->embed(inputs.value())) < 1e-5);
}

TEST_CASE("A saved TrainableBert loads in TransformerEncoder and back, unchanged", "[train]") {
  const TransformerConfig config = small_config();
  const auto model = random_model(config);
  const fs::path dir = fresh_dir("saved");
  REQUIRE(model->save(dir.string(), *faq_tokenizer()).is_ok());

  std::ifstream config_file(dir / "config.json");
  const auto j = nlohmann::json::parse(config_file);
  CHECK(j.at("architectures") == nlohmann::json::array({"BertModel"}));
  CHECK(j.at("model_type") == "bert");
  CHECK(j.at("hidden_act") == "gelu");
  CHECK(j.at("num_hidden_layers") == 2);
  std::ifstream tokenizer_config(dir / "tokenizer_config.json");
  CHECK(nlohmann::json::parse(tokenizer_config).at("do_lower_case") == true);

  rapidqa::TransformerEncoderOptions options;
  options.model_dir = dir.string();
  options.pooling = rapidqa::Pooling::kMean;
  auto encoder = rapidqa::TransformerEncoder::load(options);
  REQUIRE(encoder.is_ok());
  std::vector<float> from_runtime, from_module;
  REQUIRE((*encoder)->encode(kTexts, from_runtime).is_ok());
  REQUIRE(train::encode_texts(*model, *faq_tokenizer(), kTexts, 64, 2, from_module).is_ok());
  REQUIRE(from_runtime.size() == from_module.size());
  double diff = 0;
  for (std::size_t i = 0; i < from_runtime.size(); ++i) diff = std::max(diff, double(std::fabs(from_runtime[i] - from_module[i])));
  CHECK(diff < 1e-5);
  // The runtime's tokenizer, read from the saved vocab.txt, gives the ids
  // training used.
  auto ids = (*encoder)->token_ids(kTexts);
  REQUIRE(ids.is_ok());
  for (std::size_t i = 0; i < kTexts.size(); ++i) CHECK((*ids)[i] == faq_tokenizer()->encode(kTexts[i], 64)->input_ids);

  auto reloaded = train::TrainableBert::load(dir.string());
  REQUIRE(reloaded.is_ok());
  const auto before = model->export_tensors();
  const auto after = (*reloaded)->export_tensors();
  REQUIRE(before.size() == after.size());
  for (const auto& [name, tensor] : before) {
    INFO(name);
    CHECK(at::equal(tensor, after.at(name)));
  }
}

TEST_CASE("TrainableBert layers take their sizes from their weights", "[train]") {
  // What the Pruner will do: layer 1 keeps 2 of 4 heads and 40 of 64 neurons.
  const TransformerConfig config = small_config();
  auto tensors = random_model(config)->export_tensors();
  const std::string p = "encoder.layer.1.";
  for (const char* name : {"attention.self.query", "attention.self.key", "attention.self.value"}) {
    tensors[p + name + ".weight"] = tensors[p + name + ".weight"].narrow(0, 0, 16).contiguous();
    tensors[p + name + ".bias"] = tensors[p + name + ".bias"].narrow(0, 0, 16).contiguous();
  }
  tensors[p + "attention.output.dense.weight"] = tensors[p + "attention.output.dense.weight"].narrow(1, 0, 16).contiguous();
  tensors[p + "intermediate.dense.weight"] = tensors[p + "intermediate.dense.weight"].narrow(0, 0, 40).contiguous();
  tensors[p + "intermediate.dense.bias"] = tensors[p + "intermediate.dense.bias"].narrow(0, 0, 40).contiguous();
  tensors[p + "output.dense.weight"] = tensors[p + "output.dense.weight"].narrow(1, 0, 40).contiguous();

  auto pruned = train::TrainableBert::from_tensors(config, tensors, "pruned");
  REQUIRE(pruned.is_ok());
  CHECK((*pruned)->layer(0).shape().num_heads == 4);
  CHECK((*pruned)->layer(1).shape().num_heads == 2);
  CHECK((*pruned)->layer(1).shape().intermediate_size == 40);
  auto inputs = train::make_inputs(*faq_tokenizer(), kTexts, 64);
  REQUIRE(inputs.is_ok());
  (*pruned)->eval();
  const at::Tensor vectors = (*pruned)->embed(inputs.value());
  CHECK(vectors.sizes() == at::IntArrayRef({4, 32}));
  CHECK(max_abs_diff(vectors.norm(2, 1), at::ones({4})) < 1e-5);
  // config.json cannot say a layer is smaller yet: saving refuses.
  const auto saved = (*pruned)->save(fresh_dir("pruned").string(), *faq_tokenizer());
  CHECK(saved.code() == rapidqa::StatusCode::kFailedPrecondition);

  tensors[p + "output.dense.weight"] = tensors[p + "output.dense.weight"].narrow(1, 0, 39).contiguous();
  auto inconsistent = train::TrainableBert::from_tensors(config, tensors, "broken");
  REQUIRE_FALSE(inconsistent.is_ok());
  CHECK(inconsistent.status().message() ==
        "broken: tensor 'encoder.layer.1.output.dense.weight' has shape [32, 39], expected [32, 40]");
  tensors.erase("embeddings.LayerNorm.weight");
  CHECK(train::TrainableBert::from_tensors(config, tensors, "broken").status().message().find(
            "tensor 'embeddings.LayerNorm.weight' is missing") != std::string::npos);
}

TEST_CASE("The in-batch loss rewards pairs that match and is log B when nothing does", "[train]") {
  const at::Tensor identity = at::eye(4);
  CHECK(train::in_batch_contrastive_loss(identity, identity, 0.05).item<double>() < 1e-6);
  const at::Tensor same = at::ones({4, 3}) / std::sqrt(3.0);
  CHECK(train::in_batch_contrastive_loss(same, same, 0.05).item<double>() == Approx(std::log(4.0)));
  const at::Tensor swapped = identity.index_select(0, at::tensor({1, 0, 3, 2}, at::kLong));
  CHECK(train::in_batch_contrastive_loss(identity, swapped, 0.05).item<double>() > 10);
}

TEST_CASE("A short contrastive run lowers the loss and retrieves held-back phrasings above chance", "[train]") {
  const train::FaqSplit split = faq_split();
  const auto tokenizer = faq_tokenizer();
  auto created = train::TrainableBert::create(small_config(64, 1, 2, 128));
  REQUIRE(created.is_ok());
  const auto model = created.value();
  const train::EncodeFn encode = train::encode_fn(model, tokenizer, 64);
  auto untrained = train::top1_accuracy(encode, split);
  REQUIRE(untrained.is_ok());

  train::ContrastiveOptions options = short_run(6);
  options.evaluate_every = 3;
  std::vector<train::EpochReport> seen;
  auto report = train::train_contrastive(*model, *tokenizer, split, options,
                                         [&](const train::EpochReport& r) { seen.push_back(r); });
  REQUIRE(report.is_ok());
  REQUIRE(seen.size() == 6);
  CHECK(report->epochs.size() == 6);
  CHECK(report->pairs_per_epoch >= split.training.size());
  CHECK(seen.back().mean_loss < 0.5 * seen.front().mean_loss);
  CHECK_FALSE(seen[0].held_out.has_value());
  REQUIRE(seen[2].held_out.has_value());
  REQUIRE(seen[5].held_out.has_value());
  CHECK(seen[5].elapsed >= seen[0].elapsed);
  CHECK(seen[5].steps > seen[0].steps);
  CHECK_FALSE(model->is_training());

  auto trained = train::top1_accuracy(encode, split);
  REQUIRE(trained.is_ok());
  CHECK(trained->correct == seen[5].held_out->correct);
  const double chance = 1.0 / static_cast<double>(split.entry_ids.size());
  CHECK(trained->top1() > 10 * chance);
  CHECK(trained->correct > untrained->correct);
}

TEST_CASE("Contrastive training is repeatable with a seed", "[train]") {
  const train::FaqSplit split = faq_split();
  auto losses = [&](std::uint64_t seed) {
    auto model = random_model(small_config(32, 1, 2, 64), 3);
    train::ContrastiveOptions options = short_run(2);
    options.seed = seed;
    auto report = train::train_contrastive(*model, *faq_tokenizer(), split, options);
    REQUIRE(report.is_ok());
    return std::vector<double>{report->epochs[0].mean_loss, report->epochs[1].mean_loss};
  };
  const auto first = losses(5);
  CHECK(losses(5) == first);
  CHECK(losses(6) != first);
}

TEST_CASE("The step hook sees each batch and its term joins the loss", "[train]") {
  const train::FaqSplit split = faq_split();
  auto run = [&](const train::StepLossHook& hook) {
    auto model = random_model(small_config(32, 1, 2, 64), 3);
    auto report = train::train_contrastive(*model, *faq_tokenizer(), split, short_run(1), {}, hook);
    REQUIRE(report.is_ok());
    return report->epochs[0].mean_loss;
  };
  const double plain = run({});
  std::size_t calls = 0;
  // A constant has no gradient, so training is unchanged and the reported
  // loss is exactly one higher.
  const double with_hook = run([&](const std::vector<std::string>& anchors, const std::vector<std::string>& positives,
                                   const at::Tensor& anchor_vectors, const at::Tensor& positive_vectors) {
    ++calls;
    CHECK(anchors.size() == positives.size());
    CHECK(anchor_vectors.size(0) == static_cast<std::int64_t>(anchors.size()));
    CHECK(positive_vectors.sizes() == anchor_vectors.sizes());
    CHECK(anchor_vectors.requires_grad());
    return at::ones({});
  });
  CHECK(calls > 0);
  CHECK(with_hook == Approx(plain + 1.0).margin(1e-5));  // the sum is float32
}

TEST_CASE("The trainer refuses options and splits it cannot train on", "[train]") {
  const train::FaqSplit split = faq_split();
  auto model = random_model(small_config(32, 1, 2, 64));
  auto refused = [&](train::ContrastiveOptions o, const train::FaqSplit& s) {
    auto r = train::train_contrastive(*model, *faq_tokenizer(), s, o);
    return !r.is_ok() && r.status().code() == rapidqa::StatusCode::kInvalidArgument;
  };
  train::ContrastiveOptions o = short_run(1);
  o.batch_size = 1;
  CHECK(refused(o, split));
  o = short_run(1);
  o.epochs = 0;
  CHECK(refused(o, split));
  o = short_run(1);
  o.temperature = 0;
  CHECK(refused(o, split));
  train::FaqSplit lonely;
  lonely.entry_ids = {"a"};
  lonely.training = {{"one", 0}, {"two", 0}};
  CHECK(refused(short_run(1), lonely));
}

TEST_CASE("The rapidqa-train model loads in our runtime and retrieves as it reported", "[train][trained_model]") {
  const std::string dir = RAPIDQA_TRAINED_MODEL;
  std::ifstream summary_file(fs::path(dir) / "training_summary.json");
  REQUIRE(summary_file);
  const auto summary = nlohmann::json::parse(summary_file);
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = dir;
  options.pooling = rapidqa::Pooling::kMean;
  options.max_sequence_length = 64;
  auto encoder = rapidqa::TransformerEncoder::load(options);
  REQUIRE(encoder.is_ok());
  auto accuracy = train::top1_accuracy(
      [&](const std::vector<std::string>& texts, std::vector<float>& out) { return (*encoder)->encode(texts, out); },
      faq_split(summary.at("seed").get<std::uint64_t>()));
  REQUIRE(accuracy.is_ok());
  CHECK(accuracy->top1() == Approx(summary.at("held_out_top1_runtime").get<double>()));
  CHECK(accuracy->top1() > summary.at("held_out_top1_hashing_encoder").get<double>());
  auto reloaded = train::TrainableBert::load(dir);
  REQUIRE(reloaded.is_ok());
  CHECK((*reloaded)->parameter_count() > 0);
}
