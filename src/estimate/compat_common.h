// Arithmetic shared by the two byte-exact NVIDIA estimator reproductions (private).
//
// Upstream computes in Python floats. These helpers reproduce the few Python behaviours
// whose results can differ from naive C++ double arithmetic (sum(), "%.2f" formatting)
// and define how memtune turns upstream's float byte counts into int64 bytes.
// See note [compat rounding] in docs/estimator-compat.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "memtune/core/result.h"

namespace memtune::estimate::compat {

// Megatron NUM_BYTES_IN_MEGABYTE (a MiB, although upstream prints "MB").
inline constexpr double kBytesPerUpstreamMb = 1024.0 * 1024.0;
// Megatron-Bridge NUM_BYTES_IN_GIGABYTE (a GiB, printed as "GB").
inline constexpr double kBytesPerUpstreamGb = 1024.0 * 1024.0 * 1024.0;

// Python 3.12 builtin sum() over floats with the default int start 0: the first item is
// taken as is, the rest are added with Neumaier's compensated summation, and the
// compensation is added once at the end. Empty input gives 0.
// CPython 3.12 Python/bltinmodule.c, builtin_sum_impl() (float fast path). Megatron-Bridge
// pins Python 3.12 (pyproject.toml requires-python ">=3.12,<3.13").
double PythonSum(std::span<const double> items);

// The int64 byte count memtune reports for an upstream float byte count: the nearest
// integer, halves away from zero (std::llround). Exact for integral values below 2^53.
std::int64_t RoundToBytes(double upstream_bytes);

// Python's f"{value:.2f}" (correctly rounded, ties to even on the binary value; glibc
// printf rounds the exact binary value the same way).
std::string FormatFixed2(double value);

// Megatron-LM megatron/training/vocab_utils.py _calculate_padded_vocab_size_cached()
// (re-exported by Megatron-Bridge utils/vocab_utils.py): the smallest multiple of
// divisible_by * tp that is >= vocab_size. Errors (kInvalidConfig, upstream texts):
// "vocab_size must be positive, got N", "make_vocab_size_divisible_by must be positive,
// got N", "tensor_model_parallel_size must be positive, got N".
// Example: CalculatePaddedVocabSize(128256, 128, 4) == 128512.
Result<std::int64_t> CalculatePaddedVocabSize(std::int64_t vocab_size, std::int64_t divisible_by,
                                              std::int64_t tensor_parallel_size);

// The pipeline-schedule factor both estimators apply to the activation sum, in
// upstream's order: with VPP, times 1 + (p-1)/(p*v); otherwise when p > 1 and the
// micro-batch count is known, times min(1, m/p). Returns the scaled activation bytes.
// Megatron-LM theoretical_memory_usage.py compute_activation_memory() and
// Megatron-Bridge theoretical_memory_utils.py _compute_activation_memory_bytes().
double ApplyPipelineScheduleFactor(double activation_bytes, std::int64_t pipeline_size,
                                   std::optional<std::int64_t> virtual_pipeline_size,
                                   std::optional<std::int64_t> num_microbatches);

// Checks a size upstream requires to be >= 1 (Megatron-Bridge _positive_int_attr, or a
// divisor Megatron-LM divides by). kInvalidConfig naming `field`, message
// "<name> must be positive" (Bridge's text), hint "got <value>".
Status RequirePositive(std::int64_t value, const std::string& field, const std::string& name);

// "6.75", "18", "12" (Python's repr of a float bytes-per-parameter, without ".0").
std::string FormatBytesPerParameter(double bytes_per_parameter);

// Upstream's in_flight_microbatches for the same inputs (verbose print only upstream):
// VPP: ceil(penalty * p); p > 1: min(m, p), or p when m is unknown; p == 1: 1.
int InFlightMicrobatches(std::int64_t pipeline_size,
                         std::optional<std::int64_t> virtual_pipeline_size,
                         std::optional<std::int64_t> num_microbatches);

}  // namespace memtune::estimate::compat
