// The memory outside PyTorch of each estimated rank (private to assess).
#pragma once

#include <vector>

#include "memtune/core/result.h"
#include "memtune/estimate/estimate.h"
#include "memtune/model/job.h"
#include "memtune/nonpytorch/non_pytorch.h"

namespace memtune::assess::internal {

// [i] for e.ranks[i], on the job's memtune.gpu (none named: nonpytorch's defaults).
// Errors: kNotFound for an unknown GPU; those of nonpytorch::ReadNcclSettings.
Result<std::vector<nonpytorch::NonPytorchMemory>> OutsideMemory(const model::Job& job,
                                                                const estimate::Estimate& e);

}  // namespace memtune::assess::internal
