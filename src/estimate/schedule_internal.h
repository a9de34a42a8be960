// The estimator's allocation-light forms of schedule.h (private to src/estimate/): the
// pipeline layout as one flat chunk list, and the live micro-batch counts into a buffer.
// EstimateMemory runs both on every estimate; BuildPipelineLayout and
// LiveMicrobatchesPerChunk are these plus the copies into their vectors.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/estimate/schedule.h"

namespace memtune::estimate::internal {

// Every pipeline rank's chunks in one vector, rank-major: rank r's virtual stage c is
// chunks[r * vp_size + c] (StageLayout::chunks of BuildPipelineLayout, in one allocation).
struct PipelineChunks {
  int pp_size = 1;  // ranks
  int vp_size = 1;  // chunks per rank
  std::vector<ModelChunk> chunks;
  std::span<const ModelChunk> Stage(int pp_rank) const {
    return {chunks.data() + static_cast<std::size_t>(pp_rank) * vp_size,
            static_cast<std::size_t>(vp_size)};
  }
};

// BuildPipelineLayout's layout (same rules, same errors), flat.
Result<PipelineChunks> BuildPipelineChunks(const model::ModelConfig& model);

// LiveMicrobatchesPerChunk written into `live` (one entry per chunk; overwritten).
void FillLiveMicrobatches(int pp_size, int pp_rank, std::int64_t num_microbatches, int group_size,
                          bool ep_overlap, std::span<int> live);

// Transformer layers of a rank's chunks (StageLayout::NumLayers).
int NumLayers(std::span<const ModelChunk> chunks);

}  // namespace memtune::estimate::internal
