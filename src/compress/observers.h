// Range observers for static quantization: each watches the inputs of one
// layer during calibration and proposes the real range [min, max] that the
// layer's u8 activations will cover (affine_qparams turns it into a scale
// and zero point).
//
//   max-abs         [-m, m] with m the largest |x| seen
//   min-max         the smallest and largest values seen (PyTorch's
//                   MinMaxObserver)
//   moving-average  min and max of each batch, averaged with constant c:
//                   min += c * (batch_min - min) (PyTorch's
//                   MovingAverageMinMaxObserver, c = 0.01; the first batch
//                   sets the range)
//   percentile      the p-th and (100 - p)-th percentiles of a strided
//                   sample of the values (outliers are clipped)
//   entropy         a 2048-bin histogram of |x|; the clipping threshold
//                   whose 128-level quantization loses the least
//                   information (smallest KL divergence), as TensorRT's
//                   entropy calibration chooses it
//
// Thread safety: thread-compatible.
#pragma once

#include <ATen/Tensor.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::compress {

enum class ObserverKind { kMaxAbs, kMinMax, kMovingAverage, kPercentile, kEntropy };

const char* observer_name(ObserverKind kind);  // "max-abs", "min-max", ...
// kInvalidArgument listing the known names.
Result<ObserverKind> parse_observer(const std::string& name);

struct ObserverOptions {
  double averaging_constant = 0.01;  // moving-average
  double percentile = 99.99;         // percentile: the upper percentile kept, in percent
  std::size_t max_samples = 1u << 21;  // percentile: values kept in all
  std::size_t histogram_bins = 2048;   // entropy
  std::size_t quantized_levels = 128;  // entropy: levels of |x| an int8 value can take
};

class RangeObserver {
 public:
  virtual ~RangeObserver() = default;
  // x: float32, any shape.
  virtual void observe(const at::Tensor& x) = 0;
  // The proposed range; {0, 0} before anything was observed.
  virtual std::pair<float, float> range() const = 0;
  virtual ObserverKind kind() const = 0;
};

std::unique_ptr<RangeObserver> make_observer(ObserverKind kind, const ObserverOptions& options = {});

}  // namespace rapidqa::compress
