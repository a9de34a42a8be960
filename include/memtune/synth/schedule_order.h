// The order in which one pipeline rank runs its forward and backward passes, exactly as
// Megatron-Core schedules them (megatron/core/pipeline_parallel/schedules.py @ d98e8a6:
// forward_backward_no_pipelining, forward_backward_pipelining_without_interleaving,
// forward_backward_pipelining_with_interleaving, get_pp_rank_microbatches,
// get_schedule_table).
#pragma once

#include <cstdint>
#include <vector>

namespace memtune::synth {

// One forward or backward pass of one micro-batch through one model chunk.
struct PipelineStep {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;  // virtual pipeline stage (0 without VPP)
  bool operator==(const PipelineStep&) const = default;
};

// The (micro-batch, chunk) pairs in forward order (get_schedule_table): for each group of
// `group_size` micro-batches (the last group takes the rest), for each chunk, the group's
// micro-batches. One chunk: 0, 1, ..., m - 1.
// Example: m = 3, v = 2, G = 2 -> (0,0) (1,0) (0,1) (1,1) (2,0) (2,1).
std::vector<PipelineStep> ScheduleTable(std::int64_t num_microbatches, int num_chunks, int group_size);

// The whole step of rank `pp_rank`: warm-up forwards (estimate::WarmupMicrobatches), then
// steady pairs F(warmup + k), B(k), then the cool-down backwards. The k-th backward uses
// the k-th table entry with its chunk reversed (v - 1 - chunk). PP = 1: F(k), B(k).
// Preconditions: pp_size >= 1, 0 <= pp_rank < pp_size, num_chunks >= 1, m >= 1.
// Example: p = 2, r = 0, v = 1, m = 3 -> F0 F1 B0 F2 B1 B2.
std::vector<PipelineStep> PipelineSchedule(int pp_size, int pp_rank, int num_chunks,
                                           std::int64_t num_microbatches, int group_size,
                                           bool ep_overlap);

}  // namespace memtune::synth
