// BatchLatencyModel: what a batch will cost, learned from what batches
// cost. It fits
//     latency = intercept + per_request * batch_size + per_token * tokens
// by weighted least squares over its own measurements; older measurements
// fade (each new one multiplies the weight of the rest by `forgetting`), so
// the model follows a machine whose speed changes under load. The batcher
// uses it to decide when waiting for more requests would break its latency
// target; fit() shows what it learned.
//
// Thread safety: thread-compatible (DynamicBatcher guards it with its lock).
// Header-only, like DynamicBatcher.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace rapidqa {

class BatchLatencyModel {
 public:
  struct Fit {
    double intercept_us = 0;    // fixed cost of a batch
    double per_request_us = 0;  // added by each request
    double per_token_us = 0;    // added by each token
    std::uint64_t samples = 0;  // measurements seen
    double rms_error_us = 0;    // recent prediction error (before each measurement was learned)
  };

  // forgetting in (0, 1]: 1 keeps every measurement at full weight.
  explicit BatchLatencyModel(double forgetting = 0.98) : forgetting_(std::clamp(forgetting, 0.5, 1.0)) {}

  void observe(std::size_t batch_size, std::size_t tokens, std::chrono::nanoseconds latency) {
    const std::array<double, 3> x{1.0, static_cast<double>(batch_size), static_cast<double>(tokens)};
    const double y = static_cast<double>(latency.count()) / 1000.0;
    if (ready()) {
      const double error = y - evaluate(x);
      squared_error_ = forgetting_ * squared_error_ + (1 - forgetting_) * error * error;
    }
    for (std::size_t i = 0; i < 3; ++i) {
      for (std::size_t j = 0; j < 3; ++j) gram_[i][j] = forgetting_ * gram_[i][j] + x[i] * x[j];
      moment_[i] = forgetting_ * moment_[i] + x[i] * y;
    }
    ++samples_;
    solve();
  }

  // At least three measurements: before that, predict() returns zero.
  bool ready() const { return samples_ >= 3; }

  std::chrono::nanoseconds predict(std::size_t batch_size, std::size_t tokens) const {
    if (!ready()) return std::chrono::nanoseconds(0);
    const double us = evaluate({1.0, static_cast<double>(batch_size), static_cast<double>(tokens)});
    return std::chrono::nanoseconds(static_cast<std::int64_t>(std::max(0.0, us) * 1000.0));
  }

  Fit fit() const { return {coefficients_[0], coefficients_[1], coefficients_[2], samples_, std::sqrt(squared_error_)}; }

 private:
  double evaluate(const std::array<double, 3>& x) const {
    return coefficients_[0] * x[0] + coefficients_[1] * x[1] + coefficients_[2] * x[2];
  }

  // Gaussian elimination on the 3x3 normal equations, with a small ridge:
  // while every batch has the same size (or one token per request) the
  // columns are collinear and the ridge splits the cost between them
  // instead of failing.
  void solve() {
    double a[3][4];
    const double ridge = 1e-9 * (gram_[0][0] + gram_[1][1] + gram_[2][2]) + 1e-12;
    for (std::size_t i = 0; i < 3; ++i) {
      for (std::size_t j = 0; j < 3; ++j) a[i][j] = gram_[i][j] + (i == j ? ridge : 0.0);
      a[i][3] = moment_[i];
    }
    for (std::size_t c = 0; c < 3; ++c) {
      std::size_t pivot = c;
      for (std::size_t r = c + 1; r < 3; ++r) {
        if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
      }
      if (std::abs(a[pivot][c]) < 1e-18) return;  // keep the last good fit
      for (std::size_t j = 0; j < 4; ++j) std::swap(a[c][j], a[pivot][j]);
      for (std::size_t r = 0; r < 3; ++r) {
        if (r == c) continue;
        const double f = a[r][c] / a[c][c];
        for (std::size_t j = c; j < 4; ++j) a[r][j] -= f * a[c][j];
      }
    }
    for (std::size_t i = 0; i < 3; ++i) coefficients_[i] = a[i][3] / a[i][i];
  }

  double forgetting_;
  double gram_[3][3] = {};
  double moment_[3] = {};
  double coefficients_[3] = {};
  double squared_error_ = 0;
  std::uint64_t samples_ = 0;
};

}  // namespace rapidqa
