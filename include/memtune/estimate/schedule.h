// The pipeline view of a job: which transformer layers each pipeline rank builds, split
// into model chunks (virtual stages), and how many micro-batches each chunk holds in
// flight at the rank's activation peak.
//
// Sources (Megatron-LM d98e8a6):
//   megatron/core/transformer/transformer_block.py get_num_layers_to_build /
//     get_transformer_layer_offset (even, uneven first/last, account_for_* splits),
//   megatron/core/transformer/pipeline_parallel_layer_layout.py (explicit layouts),
//   megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches and
//     get_schedule_table (warm-up counts and the interleaved forward order).
#pragma once

#include <cstdint>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"

namespace memtune::estimate {

// One model chunk (virtual pipeline stage) of a pipeline rank.
struct ModelChunk {
  int vp_stage = 0;
  int first_layer = 0;         // global index of its first transformer layer
  int num_layers = 0;          // transformer layers it builds (contiguous)
  bool has_embedding = false;  // the word embedding (pipeline rank 0, chunk 0)
  bool has_output = false;     // final norm, output layer and loss (last rank, last chunk)
  int num_mtp_layers = 0;      // MTP blocks (built with the output)
};

// The chunks of one pipeline rank, in vp_stage order.
struct StageLayout {
  int pp_rank = 0;
  std::vector<ModelChunk> chunks;
  int NumLayers() const;
};

// Layers of every pipeline rank, honouring (in MCore's precedence) an explicit
// pipeline_model_parallel_layout, then num_layers_in_first/last_pipeline_stage, then
// account_for_embedding/loss_in_pipeline_split, else an even split. With VPP the chunk of
// rank r at virtual stage c follows MCore's interleaved order (all ranks' chunk 0, then
// all ranks' chunk 1, ...).
// Errors: kInvalidConfig naming the field when layers do not divide as MCore requires
// (e.g. "model.num_layers: 80 layers do not divide evenly over 3 pipeline stages").
// Example: Llama3-70B PP4 VPP5 -> 4 stages of 5 chunks of 4 layers; rank 1 chunk 0
// holds layers 4..7.
Result<std::vector<StageLayout>> BuildPipelineLayout(const model::ModelConfig& model);

// Warm-up forward passes of pipeline rank `pp_rank` (MCore get_pp_rank_microbatches):
// non-interleaved p - r - 1; interleaved 2(p - r - 1) + (v - 1)·G (+1 with EP overlap);
// capped at m·v. PP = 1: 0.
int WarmupMicrobatches(int pp_size, int pp_rank, int num_chunks, std::int64_t num_microbatches,
                       int group_size, bool ep_overlap);

// How many micro-batches each chunk of rank `pp_rank` holds at the rank's activation
// peak: the first warm-up + 1 forward passes of the schedule (the first backward starts
// after them), capped at m·v. Non-interleaved: min(p - r, m) on the single chunk.
// Interleaved: the forward order of get_schedule_table (groups of G micro-batches per
// chunk). Result has one entry per chunk.
// Example: p=4, v=5, m=16, G=4, rank 0 -> {7, 4, 4, 4, 4} (23 in all).
std::vector<int> LiveMicrobatchesPerChunk(int pp_size, int pp_rank, int num_chunks,
                                          std::int64_t num_microbatches, int group_size,
                                          bool ep_overlap);

// The order in which one pipeline rank runs its forward and backward passes, exactly as
// Megatron-Core schedules them (megatron/core/pipeline_parallel/schedules.py @ d98e8a6:
// forward_backward_no_pipelining, forward_backward_pipelining_without_interleaving,
// forward_backward_pipelining_with_interleaving, get_pp_rank_microbatches,
// get_schedule_table).
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
std::vector<PipelineStep> ScheduleTable(std::int64_t num_microbatches, int num_chunks,
                                        int group_size);

// The whole step of rank `pp_rank`: warm-up forwards (WarmupMicrobatches), then
// steady pairs F(warmup + k), B(k), then the cool-down backwards. The k-th backward uses
// the k-th table entry with its chunk reversed (v - 1 - chunk). PP = 1: F(k), B(k).
// Preconditions: pp_size >= 1, 0 <= pp_rank < pp_size, num_chunks >= 1, m >= 1.
// Example: p = 2, r = 0, v = 1, m = 3 -> F0 F1 B0 F2 B1 B2.
std::vector<PipelineStep> PipelineSchedule(int pp_size, int pp_rank, int num_chunks,
                                           std::int64_t num_microbatches, int group_size,
                                           bool ep_overlap);

}  // namespace memtune::estimate
