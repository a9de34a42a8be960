// The memory outside PyTorch of each estimated rank.
#include "assess/outside.h"

#include "memtune/model/gpu_catalog.h"

namespace memtune::assess::internal {

Result<std::vector<nonpytorch::NonPytorchMemory>> OutsideMemory(const model::Job& job,
                                                                const estimate::Estimate& e) {
  const model::GpuSpec* gpu = nullptr;
  if (!job.memtune.gpu.empty()) {
    MEMTUNE_TRY(gpu, model::FindGpuEntry(job.memtune.gpu));
  }
  std::vector<nonpytorch::NonPytorchMemory> out;
  out.reserve(e.ranks.size());
  for (const estimate::RankEstimate& r : e.ranks) {
    MEMTUNE_TRY(auto memory, nonpytorch::EstimateNonPytorch(job, gpu, r.pp_rank));
    out.push_back(std::move(memory));
  }
  return out;
}

}  // namespace memtune::assess::internal
