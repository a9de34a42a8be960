// Overrides (--set, flags) that name no field: refused instead of dropped.
#pragma once

#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job_compose.h"
#include "memtune/model/job_parse.h"

namespace memtune::model::internal {

// An error for the first override whose path the parser ignored (doc.ignored_fields) and that
// no upstream (Megatron-LM flag or Megatron-Bridge field, docs/ignored-fields.md) defines: the
// value the user asked for would be lost. The hint names the near field: by edit distance, by
// words (tensor_parallel_size -> tensor_model_parallel_size) or by initials (mbs ->
// micro_batch_size).
// Errors: kInvalidConfig naming the path, e.g. "train.mbs (--set) is not a field memtune or
// upstream defines" with "did you mean 'train.micro_batch_size'?".
Status RefuseUnknownOverrides(const std::vector<JobOverride>& overrides, const JobDocument& doc);

}  // namespace memtune::model::internal
