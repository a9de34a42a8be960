// Megatron-Core's per-rank pipeline order (schedules.py @ d98e8a6).
#include <algorithm>

#include "memtune/estimate/schedule.h"

namespace memtune::estimate {

std::vector<PipelineStep> ScheduleTable(std::int64_t num_microbatches, int num_chunks,
                                        int group_size) {
  std::vector<PipelineStep> table;
  table.reserve(static_cast<std::size_t>(num_microbatches * num_chunks));
  const std::int64_t g = std::max(1, group_size);
  for (std::int64_t start = 0; start < num_microbatches; start += g) {
    const std::int64_t end = std::min(start + g, num_microbatches);
    for (int c = 0; c < num_chunks; ++c) {
      for (std::int64_t mb = start; mb < end; ++mb) {
        table.push_back(PipelineStep{true, static_cast<int>(mb), c});
      }
    }
  }
  return table;
}

std::vector<PipelineStep> PipelineSchedule(int pp_size, int pp_rank, int num_chunks,
                                           std::int64_t num_microbatches, int group_size,
                                           bool ep_overlap) {
  // Without VPP the table is plain micro-batch order (get_schedule_table with one chunk).
  const int g = num_chunks == 1 ? 1 : group_size;
  const std::vector<PipelineStep> table = ScheduleTable(num_microbatches, num_chunks, g);
  const std::int64_t total = static_cast<std::int64_t>(table.size());
  const std::int64_t warmup =
      WarmupMicrobatches(pp_size, pp_rank, num_chunks, num_microbatches, group_size, ep_overlap);
  auto backward = [&](std::int64_t k) {
    PipelineStep s = table[k];
    s.forward = false;
    s.chunk = num_chunks - 1 - s.chunk;
    return s;
  };
  std::vector<PipelineStep> steps;
  steps.reserve(static_cast<std::size_t>(2 * total));
  for (std::int64_t k = 0; k < warmup; ++k) steps.push_back(table[k]);
  for (std::int64_t k = 0; k + warmup < total; ++k) {
    steps.push_back(table[warmup + k]);
    steps.push_back(backward(k));
  }
  for (std::int64_t k = total - warmup; k < total; ++k) steps.push_back(backward(k));
  return steps;
}

}  // namespace memtune::estimate
