// One-line summaries of a parsed job for report headers: the precision it trains in (and
// where that came from), and its parameter count (with the published one for a preset).
#pragma once

#include <cstdint>
#include <string>

#include "memtune/model/job_parse.h"

namespace memtune::model {

// E.g. "bf16_mixed (mixed_precision): bf16 parameters and compute, fp32 gradient reduce;
// FP8 hybrid tensorwise" or "no mixed_precision preset: bf16 parameters (model.params_dtype
// from the HF config's torch_dtype); pass --precision bf16_mixed for Bridge's recipe
// default". Says which input decided it.
std::string DescribePrecision(const JobDocument& doc);

// The model's parameters at TP 1 (model/parameters.h CountParameters), and the published
// count when the model is a catalog preset: "8.03 B (8,030,261,248); published 8.03 B
// (memtune models llama3-8b)".
std::string DescribeParameters(const Job& job);

}  // namespace memtune::model
