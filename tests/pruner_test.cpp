// Pruning masks: torch.nn.utils.prune's own masks on fixed weights
// (tests/reference/pruning_reference.py writes them), then what PyTorch
// leaves open or never sees: the order among equal values, the errors for
// bad amounts and tensors, make_permanent, and the compact sparse storage.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "compress/pruning_masks.h"

using rapidqa::StatusCode;
using rapidqa::compress::PrunableTensor;
using rapidqa::compress::PruningAmount;
namespace compress = rapidqa::compress;

// A failed call shows its message.
#define REQUIRE_OK(expr)                   \
  do {                                     \
    const auto& outcome_ = (expr);         \
    INFO(status_of(outcome_).to_string()); \
    REQUIRE(outcome_.is_ok());          \
  } while (false)
#define CHECK_OK(expr)                     \
  do {                                     \
    const auto& outcome_ = (expr);         \
    INFO(status_of(outcome_).to_string()); \
    CHECK(outcome_.is_ok());               \
  } while (false)

namespace {

const rapidqa::Status& status_of(const rapidqa::Status& s) { return s; }
template <typename T>
const rapidqa::Status& status_of(const rapidqa::Result<T>& r) { return r.status(); }

const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::string(RAPIDQA_PRUNING_REFERENCE));
    REQUIRE(in);
    return nlohmann::json::parse(in);
  }();
  return j;
}

// A 2-D JSON array as a float32 tensor; the reference writes float32 values
// as doubles, so the conversion back is exact.
at::Tensor matrix_of(const nlohmann::json& rows) {
  std::vector<float> flat;
  for (const auto& row : rows)
    for (const auto& v : row) flat.push_back(v.get<float>());
  const auto n_rows = static_cast<std::int64_t>(rows.size());
  return at::tensor(flat).view({n_rows, n_rows ? static_cast<std::int64_t>(flat.size()) / n_rows : 0});
}

PruningAmount amount_of(const nlohmann::json& step) {
  return step.at("amount_kind") == "count" ? PruningAmount::count(step.at("amount").get<std::int64_t>())
                                           : PruningAmount::fraction(step.at("amount").get<double>());
}

// Same values, bit for bit (unlike at::equal, -0.0 and 0.0 differ).
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

std::int64_t zeros_in(const at::Tensor& mask) { return (mask == 0).sum().item<std::int64_t>(); }

// 1, 2, ..., n in a fixed scrambled order with alternating signs: distinct
// magnitudes, so the smallest k are known without ranking.
at::Tensor distinct_weights(std::int64_t rows, std::int64_t cols, std::int64_t stride = 7) {
  const std::int64_t n = rows * cols;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const float magnitude = static_cast<float>((i * stride) % n + 1);
    v[static_cast<std::size_t>(i)] = (i % 2 ? -magnitude : magnitude) * 0.01f;
  }
  return at::tensor(v).view({rows, cols});
}

}  // namespace

TEST_CASE("Masks equal torch.nn.utils.prune's on the reference cases", "[pruner][reference]") {
  const auto& ref = reference();
  std::map<std::string, at::Tensor> weights;
  for (const auto& [name, rows] : ref.at("weights").items()) weights[name] = matrix_of(rows);
  const auto& cases = ref.at("cases");
  REQUIRE(cases.size() >= 20);

  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.at("name").get<std::string>()) {
      std::vector<PrunableTensor> layers;
      std::map<std::string, std::size_t> index;
      for (const auto& layer : ref.at("layers")) {
        const std::string name = layer.at("name");
        index[name] = layers.size();
        layers.push_back({name, weights.at(name).clone(), {}});
      }
      const auto& steps = c.at("steps");
      for (std::size_t s = 0; s < steps.size(); ++s) {
        const auto& step = steps[s];
        const std::string method = step.at("method");
        INFO("step " << s << ": " << step.dump());
        if (method == "global_l1_unstructured") {
          // PyTorch prunes the listed layers in the listed order; so do we.
          std::vector<PrunableTensor> chosen;
          for (const auto& name : step.at("tensors")) chosen.push_back(layers[index.at(name)]);
          REQUIRE_OK(compress::global_l1_unstructured(chosen, amount_of(step)));
          for (const auto& t : chosen) layers[index.at(t.name)].mask = t.mask;
        } else if (method == "l1_unstructured") {
          REQUIRE_OK(compress::l1_unstructured(layers[index.at(step.at("tensor"))], amount_of(step)));
        } else {
          REQUIRE(method == "ln_structured");
          const double n = step.at("n").is_string() ? std::numeric_limits<double>::infinity()
                                                    : step.at("n").get<double>();
          const auto status = compress::ln_structured(layers[index.at(step.at("tensor"))], amount_of(step), n,
                                                      step.at("dim").get<std::int64_t>());
          REQUIRE_OK(status);
        }
        const auto& expected = c.at("masks_after_steps").at(s);
        for (const auto& t : layers) {
          INFO("tensor " << t.name);
          if (!expected.contains(t.name)) {
            CHECK_FALSE(t.mask.defined());  // never pruned, as in PyTorch
            continue;
          }
          REQUIRE(t.mask.defined());
          const at::Tensor torch_mask = matrix_of(expected.at(t.name));
          INFO("ours:\n" << t.mask << "\nPyTorch's:\n" << torch_mask);
          CHECK(at::equal(t.mask, torch_mask));
        }
      }
      // prune.remove leaves orig * mask in the weight.
      REQUIRE_OK(compress::make_permanent(layers));
      for (const auto& t : layers) {
        INFO("tensor " << t.name);
        CHECK_FALSE(t.mask.defined());
        CHECK(at::equal(t.weight, matrix_of(c.at("weights_after_remove").at(t.name))));
      }
    }
  }
}

TEST_CASE("A fraction applies to the entries not pruned yet: 0.4 twice prunes 64%", "[pruner]") {
  SECTION("global over two tensors") {
    std::vector<PrunableTensor> ts{{"a", distinct_weights(10, 6), {}}, {"b", distinct_weights(8, 5, 3), {}}};
    REQUIRE_OK(compress::global_l1_unstructured(ts, PruningAmount::fraction(0.4)));
    CHECK(zeros_in(ts[0].mask) + zeros_in(ts[1].mask) == 40);
    const at::Tensor first_a = ts[0].mask.clone();
    REQUIRE_OK(compress::global_l1_unstructured(ts, PruningAmount::fraction(0.4)));
    CHECK(zeros_in(ts[0].mask) + zeros_in(ts[1].mask) == 64);
    CHECK((ts[0].mask <= first_a).all().item<bool>());  // what was pruned stays pruned

    // One threshold over both: nothing kept is smaller than anything pruned.
    const at::Tensor mags = at::cat({ts[0].weight.reshape(-1), ts[1].weight.reshape(-1)}).abs();
    const at::Tensor mask = at::cat({ts[0].mask.reshape(-1), ts[1].mask.reshape(-1)});
    CHECK(mags.masked_select(mask == 0).max().item<float>() < mags.masked_select(mask == 1).min().item<float>());
  }
  SECTION("one tensor") {
    PrunableTensor t{"w", distinct_weights(10, 10), {}};
    REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::fraction(0.4)));
    const at::Tensor first = t.mask;  // shares the tensor, not a copy
    REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::fraction(0.4)));
    CHECK(zeros_in(t.mask) == 64);
    CHECK(zeros_in(first) == 40);  // a new mask each time: the earlier one is still there
    // The 64 smallest magnitudes are 0.01 ... 0.64.
    CHECK(t.weight.abs().masked_select(t.mask == 0).max().item<float>() == Approx(0.64f));
  }
  SECTION("slices") {
    PrunableTensor t{"w", distinct_weights(10, 4), {}};
    REQUIRE_OK(compress::ln_structured(t, PruningAmount::fraction(0.4), 2, 0));
    const at::Tensor first = t.mask;
    REQUIRE_OK(compress::ln_structured(t, PruningAmount::fraction(0.4), 2, 0));
    CHECK(zeros_in(first) == 16);
    // 4 of 10 rows, then round(0.4 * 6) = 2 of the 6 left.
    CHECK((t.mask.sum(1) == 0).sum().item<std::int64_t>() == 6);
    CHECK(zeros_in(t.mask) == 24);
  }
}

TEST_CASE("Fractions round half to even as Python's round, counts are taken as given", "[pruner][amount]") {
  auto prune_of = [](PruningAmount a, std::int64_t candidates) {
    const auto r = a.number_to_prune(candidates);
    REQUIRE_OK(r);
    return *r;
  };
  CHECK(prune_of(PruningAmount::fraction(0.5), 5) == 2);   // 2.5
  CHECK(prune_of(PruningAmount::fraction(0.7), 5) == 4);   // 3.5
  CHECK(prune_of(PruningAmount::fraction(0.3), 5) == 2);   // 1.5
  CHECK(prune_of(PruningAmount::fraction(0.5), 1) == 0);   // 0.5
  CHECK(prune_of(PruningAmount::fraction(0.5), 9) == 4);   // 4.5
  CHECK(prune_of(PruningAmount::fraction(0.07), 50) == 4); // 3.5000000000000004 in double, as in Python
  CHECK(prune_of(PruningAmount::fraction(0.4), 48) == 19); // 19.2
  CHECK(prune_of(PruningAmount::fraction(1.0), 7) == 7);
  CHECK(prune_of(PruningAmount::fraction(0.0), 7) == 0);
  CHECK(prune_of(PruningAmount::count(5), 5) == 5);
  CHECK(prune_of(PruningAmount::count(0), 0) == 0);
  CHECK(PruningAmount::fraction(0.25).to_string() == "fraction 0.25");
  CHECK(PruningAmount::count(3).to_string() == "count 3");
}

TEST_CASE("Bad amounts are refused with a message that says what is accepted", "[pruner][amount]") {
  for (const double f : {1.5, -0.1, std::nan("")}) {
    const auto s = PruningAmount::fraction(f).validate();
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains("is outside [0, 1]"));
  }
  CHECK_THAT(PruningAmount::count(-1).validate().message(), Catch::Contains("count -1 is negative"));
  CHECK(PruningAmount::count(6).number_to_prune(5).status().code() == StatusCode::kInvalidArgument);

  PrunableTensor t{"encoder.w", distinct_weights(4, 5), {}};
  auto s = compress::l1_unstructured(t, PruningAmount::fraction(1.01));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("'encoder.w'") && Catch::Contains("fraction 1.01 is outside [0, 1]"));
  CHECK_FALSE(t.mask.defined());

  // A count is checked against what is left, not against the whole tensor.
  REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::count(15)));
  const at::Tensor after_first = t.mask;
  s = compress::l1_unstructured(t, PruningAmount::count(6));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("count 6 is more than the 5 candidates not pruned yet"));
  CHECK(t.mask.is_same(after_first));  // a failed call changes nothing

  std::vector<PrunableTensor> ts{{"a", distinct_weights(2, 2), {}}, {"b", distinct_weights(3, 1), {}}};
  s = compress::global_l1_unstructured(ts, PruningAmount::count(8));
  CHECK_THAT(s.message(), Catch::Contains("over 'a', 'b'") && Catch::Contains("more than the 7 candidates"));
  CHECK_FALSE(ts[0].mask.defined());

  PrunableTensor slices{"w", distinct_weights(4, 5), {}};
  s = compress::ln_structured(slices, PruningAmount::count(5), 2, 0);
  CHECK_THAT(s.message(), Catch::Contains("4 of 4 slices not pruned yet") && Catch::Contains("count 5"));
  s = compress::ln_structured(slices, PruningAmount::count(-2), 2, 0);
  CHECK_THAT(s.message(), Catch::Contains("count -2 is negative"));
  CHECK_FALSE(slices.mask.defined());
}

TEST_CASE("Equal magnitudes: the entry at the lower position is pruned first", "[pruner][ties]") {
  SECTION("within a tensor, row-major") {
    PrunableTensor t{"w", at::tensor({2.0f, 1.0f, -1.0f, 1.0f, 3.0f, -1.0f}).view({2, 3}), {}};
    REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::count(2)));
    CHECK(at::equal(t.mask, at::tensor({1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f}).view({2, 3})));
    // The tie continues among what is left.
    REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::count(1)));
    CHECK(at::equal(t.mask, at::tensor({1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f}).view({2, 3})));
  }
  SECTION("across tensors, in the order given") {
    std::vector<PrunableTensor> ts{{"a", at::tensor({1.0f, -1.0f}).view({1, 2}), {}},
                                   {"b", at::tensor({-1.0f, 1.0f, 1.0f}).view({3, 1}), {}}};
    REQUIRE_OK(compress::global_l1_unstructured(ts, PruningAmount::count(3)));
    CHECK(at::equal(ts[0].mask, at::zeros({1, 2})));
    CHECK(at::equal(ts[1].mask, at::tensor({0.0f, 1.0f, 1.0f}).view({3, 1})));

    std::vector<PrunableTensor> reversed{{"b", ts[1].weight, {}}, {"a", ts[0].weight, {}}};
    REQUIRE_OK(compress::global_l1_unstructured(reversed, PruningAmount::count(3)));
    CHECK(at::equal(reversed[0].mask, at::zeros({3, 1})));
    CHECK(at::equal(reversed[1].mask, at::ones({1, 2})));
  }
  SECTION("-0.0 and 0.0 are equal magnitudes") {
    PrunableTensor t{"w", at::tensor({0.5f, 0.0f, -0.0f, 0.0f}).view({2, 2}), {}};
    REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::count(2)));
    CHECK(at::equal(t.mask, at::tensor({1.0f, 0.0f, 0.0f, 1.0f}).view({2, 2})));
  }
  SECTION("on many entries (the stable sort, not a small-input path)") {
    PrunableTensor t{"w", at::ones({300, 200}), {}};
    t.weight.index_fill_(0, at::arange(0, 300, 2, at::kLong), -1.0);
    REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::fraction(0.3)));
    const at::Tensor flat = t.mask.reshape(-1);
    CHECK(at::equal(flat.slice(0, 0, 18000), at::zeros({18000})));
    CHECK(at::equal(flat.slice(0, 18000), at::ones({42000})));
  }
}

TEST_CASE("Equal slice norms: the slice with the lower index is pruned first", "[pruner][ties]") {
  // Rows 0-2 hold the same values in different orders: equal L1, L2 and max
  // norms; row 3 is larger under every norm.
  const at::Tensor w =
      at::tensor({1.0f, -2.0f, 3.0f, 3.0f, 2.0f, 1.0f, -2.0f, 3.0f, -1.0f, 5.0f, 5.0f, 5.0f}).view({4, 3});
  for (const double n : {1.0, 2.0, std::numeric_limits<double>::infinity()}) {
    INFO("n = " << n);
    PrunableTensor rows{"w", w, {}};
    REQUIRE_OK(compress::ln_structured(rows, PruningAmount::count(2), n, 0));
    CHECK(at::equal(rows.mask.sum(1), at::tensor({0.0f, 0.0f, 3.0f, 3.0f})));
    REQUIRE_OK(compress::ln_structured(rows, PruningAmount::count(1), n, 0));
    CHECK(at::equal(rows.mask.sum(1), at::tensor({0.0f, 0.0f, 0.0f, 3.0f})));

    // The transpose: columns with equal norms, dim given from the end.
    PrunableTensor cols{"w", w.t().contiguous(), {}};
    REQUIRE_OK(compress::ln_structured(cols, PruningAmount::count(2), n, -1));
    CHECK(at::equal(cols.mask.sum(0), at::tensor({0.0f, 0.0f, 3.0f, 3.0f})));
  }
}

TEST_CASE("Bad tensors are refused, naming the tensor, and change nothing", "[pruner]") {
  PrunableTensor t{"layer.weight", distinct_weights(4, 5), {}};
  t.mask = at::ones({5, 4});
  auto s = compress::l1_unstructured(t, PruningAmount::fraction(0.5));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("'layer.weight'") && Catch::Contains("mask has shape [5, 4]"));

  t.mask = at::ones({4, 5});
  t.mask[2][3] = 0.5f;
  s = compress::l1_unstructured(t, PruningAmount::fraction(0.5));
  CHECK_THAT(s.message(), Catch::Contains("holds 0.5 at (2, 3)"));
  CHECK(t.mask[2][3].item<float>() == 0.5f);

  PrunableTensor doubles{"d", distinct_weights(2, 2).to(at::kDouble), {}};
  CHECK_THAT(compress::l1_unstructured(doubles, PruningAmount::count(1)).message(), Catch::Contains("float32"));
  PrunableTensor undefined{"u", {}, {}};
  CHECK_THAT(compress::l1_unstructured(undefined, PruningAmount::count(0)).message(), Catch::Contains("undefined"));

  // A NaN that competes cannot be ranked; one already pruned is harmless.
  PrunableTensor with_nan{"n", distinct_weights(3, 3), {}};
  with_nan.weight[1][2] = std::nanf("");
  s = compress::l1_unstructured(with_nan, PruningAmount::count(1));
  CHECK_THAT(s.message(), Catch::Contains("NaN at (1, 2)"));
  s = compress::ln_structured(with_nan, PruningAmount::count(1), 2, 0);
  CHECK_THAT(s.message(), Catch::Contains("NaN at (1, 2)"));
  CHECK_FALSE(with_nan.mask.defined());
  with_nan.mask = at::ones({3, 3});
  with_nan.mask[1][2] = 0.0f;
  CHECK_OK(compress::l1_unstructured(with_nan, PruningAmount::count(1)));
  CHECK_OK(compress::ln_structured(with_nan, PruningAmount::count(1), 2, 0));

  PrunableTensor bias{"bias", at::tensor({1.0f, 2.0f, 3.0f}), {}};
  CHECK_THAT(compress::ln_structured(bias, PruningAmount::count(1), 2, 0).message(),
             Catch::Contains("2 or more dimensions") && Catch::Contains("use l1_unstructured"));
  PrunableTensor w{"w", distinct_weights(3, 4), {}};
  CHECK_THAT(compress::ln_structured(w, PruningAmount::count(1), 2, 2).message(),
             Catch::Contains("dim 2 is out of range for shape [3, 4] (expected -2 to 1)"));
  CHECK_THAT(compress::ln_structured(w, PruningAmount::count(1), 0, 0).message(),
             Catch::Contains("n = 0 is not a norm order"));
  CHECK_THAT(compress::ln_structured(w, PruningAmount::count(1), std::nan(""), 0).message(),
             Catch::Contains("is not a norm order"));
  CHECK_FALSE(w.mask.defined());

  // Global: one bad tensor stops the call before any mask is written.
  std::vector<PrunableTensor> ts{{"good", distinct_weights(2, 3), {}}, {"bad", distinct_weights(2, 3), at::ones({3})}};
  CHECK_THAT(compress::global_l1_unstructured(ts, PruningAmount::count(1)).message(), Catch::Contains("'bad'"));
  CHECK_FALSE(ts[0].mask.defined());
}

TEST_CASE("make_permanent zeroes exactly the masked entries and drops the mask", "[pruner]") {
  at::manual_seed(11);
  const at::Tensor original = at::randn({6, 7});
  at::Tensor model_weight = original.clone();  // what a layer holds
  PrunableTensor t{"w", model_weight, {}};
  REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::fraction(0.45)));
  const at::Tensor mask = t.mask;

  const auto masked = compress::masked_weight(t);
  REQUIRE_OK(masked);
  CHECK(same_bits(model_weight, original));  // masking alone leaves the weight alone

  REQUIRE_OK(compress::make_permanent(t));
  CHECK_FALSE(t.mask.defined());
  // In place: the layer's own tensor is pruned.
  CHECK(same_bits(model_weight.masked_select(mask == 0), at::zeros({zeros_in(mask)})));  // +0.0, not -0.0
  CHECK(same_bits(model_weight.masked_select(mask == 1), original.masked_select(mask == 1)));
  CHECK(same_bits(model_weight, *masked));
  CHECK(compress::sparsity(model_weight) == Approx(19.0 / 42.0));  // round(0.45 * 42) = 19

  // Nothing to make permanent: the weight is kept as it is.
  CHECK_OK(compress::make_permanent(t));
  CHECK(same_bits(model_weight, *masked));

  // A weight that requires grad is pruned outside autograd, as prune.remove does.
  PrunableTensor trained{"trained", original.clone().set_requires_grad(true), at::zeros({6, 7})};
  REQUIRE_OK(compress::make_permanent(trained));
  CHECK(at::equal(trained.weight, at::zeros({6, 7})));

  // Many tensors: a bad mask stops the call before any weight is written.
  std::vector<PrunableTensor> ts{{"a", original.clone(), at::zeros({6, 7})}, {"b", original.clone(), at::ones({2})}};
  CHECK_THAT(compress::make_permanent(ts).message(), Catch::Contains("'b'"));
  CHECK(same_bits(ts[0].weight, original));
  CHECK(ts[0].mask.defined());
}

TEST_CASE("sparsity is the fraction of zero entries", "[pruner]") {
  CHECK(compress::sparsity(at::tensor({0.0f, -0.0f, 1.0f, 2.0f})) == 0.5);
  CHECK(compress::sparsity(at::zeros({3, 3})) == 1.0);
  CHECK(compress::sparsity(at::ones({0})) == 0.0);
  CHECK(compress::sparsity(at::Tensor()) == 0.0);
}

TEST_CASE("The sparse layout is a row-major bitmap, LSB first, and the kept values", "[pruner][sparse]") {
  PrunableTensor t{"w", at::tensor({1.0f, 0.0f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 3.0f, 0.0f, 4.0f}).view({2, 6}),
                   {}};
  // Kept (nonzero, no mask): entries 0, 2, 9 and 11.
  auto sparse = compress::encode_sparse(t);
  REQUIRE_OK(sparse);
  CHECK(sparse->shape == std::vector<std::int64_t>{2, 6});
  CHECK(at::equal(sparse->bitmap, at::tensor({0b00000101, 0b00001010}, at::kByte)));
  CHECK(at::equal(sparse->values, at::tensor({1.0f, 2.0f, 3.0f, 4.0f})));
  CHECK(sparse->byte_size() == 2 + 4 * 4);

  // With a mask, the mask decides: a kept zero is stored, a masked nonzero is not.
  t.mask = at::ones({2, 6});
  t.mask[0][0] = 0.0f;
  t.mask.slice(1, 3, 6).zero_();
  sparse = compress::encode_sparse(t);
  REQUIRE_OK(sparse);
  CHECK(at::equal(sparse->bitmap, at::tensor({0b11000110, 0b00000001}, at::kByte)));
  CHECK(at::equal(sparse->values, at::tensor({0.0f, 2.0f, 0.0f, 0.0f, 0.0f})));
}

TEST_CASE("Sparse weights round-trip and are smaller than dense from 40% sparsity", "[pruner][sparse]") {
  at::manual_seed(5);
  for (const double fraction : {0.0, 0.4, 0.6, 0.9, 1.0}) {
    INFO("fraction " << fraction);
    PrunableTensor t{"w", at::randn({37, 29}), {}};  // 1073 entries: the last bitmap byte is partial
    REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::fraction(fraction)));
    const auto sparse = compress::encode_sparse(t);
    REQUIRE_OK(sparse);
    const auto dense = compress::decode_sparse(*sparse);
    const auto mask = compress::decode_sparse_mask(*sparse);
    REQUIRE_OK(dense);
    REQUIRE_OK(mask);
    CHECK(same_bits(*dense, *compress::masked_weight(t)));
    CHECK(at::equal(*mask, t.mask));
    const std::size_t dense_bytes = static_cast<std::size_t>(t.weight.numel()) * sizeof(float);
    const std::size_t kept = static_cast<std::size_t>(t.weight.numel() - zeros_in(t.mask));
    CHECK(sparse->byte_size() == kept * 4 + (1073 + 7) / 8);
    if (fraction >= 0.4) {
      CHECK(sparse->byte_size() < dense_bytes);
      CHECK(static_cast<double>(sparse->byte_size()) < 0.64 * static_cast<double>(dense_bytes));
    }

    // A weight made permanent encodes the same way from its zeros.
    REQUIRE_OK(compress::make_permanent(t));
    const auto again = compress::encode_sparse(t);
    REQUIRE_OK(again);
    CHECK(at::equal(again->bitmap, sparse->bitmap));
    CHECK(same_bits(*compress::decode_sparse(*again), t.weight));
  }
  // No entries at all.
  const auto empty = compress::encode_sparse({"e", at::ones({0, 4}), {}});
  REQUIRE_OK(empty);
  CHECK(empty->bitmap.numel() == 0);
  CHECK(compress::decode_sparse(*empty)->sizes() == at::IntArrayRef({0, 4}));
}

TEST_CASE("Decoding refuses parts that do not agree", "[pruner][sparse]") {
  PrunableTensor t{"w", distinct_weights(3, 5), {}};
  REQUIRE_OK(compress::l1_unstructured(t, PruningAmount::fraction(0.4)));
  const auto good = compress::encode_sparse(t);
  REQUIRE_OK(good);
  REQUIRE(good->values.numel() == 9);

  auto expect_data_loss = [](const compress::SparseWeight& s, const std::string& words) {
    const auto r = compress::decode_sparse(s);
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(r.status().message(), Catch::Contains(words));
    CHECK(compress::decode_sparse_mask(s).status().code() == StatusCode::kDataLoss);
  };
  compress::SparseWeight s = *good;
  s.values = at::cat({good->values, at::ones({1})});
  expect_data_loss(s, "keeps 9 entries but there are 10 values");
  s = *good;
  s.bitmap = at::cat({good->bitmap, at::zeros({1}, at::kByte)});
  expect_data_loss(s, "has 3 bytes, shape [3, 5] needs 2");
  s = *good;
  s.bitmap = good->bitmap.clone();
  s.bitmap[1] = static_cast<std::uint8_t>(s.bitmap[1].item<std::uint8_t>() | 0x80);  // bit of entry 15 of 15
  expect_data_loss(s, "bits set past entry 15");
  s = *good;
  s.values = good->values.to(at::kDouble);
  expect_data_loss(s, "not a 1-D float32");
  s = *good;
  s.shape = {3, -5};
  expect_data_loss(s, "negative size");
}
