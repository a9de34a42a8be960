// Python-float arithmetic shared by the Megatron-LM and Megatron-Bridge reproductions.
#include "estimate/compat_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace memtune::estimate::compat {

double PythonSum(std::span<const double> items) {
  if (items.empty()) return 0.0;
  // 0 + first item is exact; CPython then enters its float loop with a zero compensation.
  double sum = items.front();
  double compensation = 0.0;
  for (double x : items.subspan(1)) {
    const double t = sum + x;
    if (std::fabs(sum) >= std::fabs(x)) {
      compensation += (sum - t) + x;
    } else {
      compensation += (x - t) + sum;
    }
    sum = t;
  }
  if (compensation != 0.0 && std::isfinite(compensation)) sum += compensation;
  return sum;
}

std::int64_t RoundToBytes(double upstream_bytes) { return std::llround(upstream_bytes); }

std::string FormatFixed2(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.2f", value);
  return buffer;
}

Status RequirePositive(std::int64_t value, const std::string& field, const std::string& name) {
  if (value > 0) return OkStatus();
  return InvalidConfig(field, name + " must be positive", "got " + std::to_string(value));
}

std::string FormatBytesPerParameter(double bytes_per_parameter) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.10g", bytes_per_parameter);
  return buffer;
}

Result<std::int64_t> CalculatePaddedVocabSize(std::int64_t vocab_size, std::int64_t divisible_by,
                                              std::int64_t tensor_parallel_size) {
  if (vocab_size <= 0) {
    return InvalidConfig("model.vocab_size",
                         "vocab_size must be positive, got " + std::to_string(vocab_size));
  }
  if (divisible_by <= 0) {
    return InvalidConfig(
        "model.make_vocab_size_divisible_by",
        "make_vocab_size_divisible_by must be positive, got " + std::to_string(divisible_by));
  }
  if (tensor_parallel_size <= 0) {
    return InvalidConfig(
        "model.tensor_model_parallel_size",
        "tensor_model_parallel_size must be positive, got " + std::to_string(tensor_parallel_size));
  }
  const std::int64_t multiple = divisible_by * tensor_parallel_size;
  // Upstream divides in floating point before math.ceil; kept for fidelity.
  const double chunks = std::ceil(static_cast<double>(vocab_size) / static_cast<double>(multiple));
  return static_cast<std::int64_t>(chunks) * multiple;
}

double ApplyPipelineScheduleFactor(double activation_bytes, std::int64_t pipeline_size,
                                   std::optional<std::int64_t> virtual_pipeline_size,
                                   std::optional<std::int64_t> num_microbatches) {
  const double p = static_cast<double>(pipeline_size);
  if (virtual_pipeline_size.has_value()) {
    const double v = static_cast<double>(*virtual_pipeline_size);
    const double penalty = 1.0 + (p - 1.0) / (p * v);
    return activation_bytes * penalty;
  }
  if (pipeline_size > 1 && num_microbatches.has_value()) {
    const double fill = static_cast<double>(*num_microbatches) / p;
    // Python min(1, fill) returns the int 1 unless fill < 1; multiplying by 1 is exact.
    if (fill < 1.0) return activation_bytes * fill;
  }
  return activation_bytes;
}

int InFlightMicrobatches(std::int64_t pipeline_size,
                         std::optional<std::int64_t> virtual_pipeline_size,
                         std::optional<std::int64_t> num_microbatches) {
  if (virtual_pipeline_size.has_value()) {
    const double p = static_cast<double>(pipeline_size);
    const double penalty = 1.0 + (p - 1.0) / (p * static_cast<double>(*virtual_pipeline_size));
    return static_cast<int>(std::ceil(penalty * p));
  }
  if (pipeline_size > 1) {
    if (!num_microbatches.has_value()) return static_cast<int>(pipeline_size);
    return static_cast<int>(std::min(*num_microbatches, pipeline_size));
  }
  return 1;
}

}  // namespace memtune::estimate::compat
