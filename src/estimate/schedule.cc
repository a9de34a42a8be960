// Layers per pipeline rank and model chunk, and the in-flight micro-batch count per chunk.
#include "memtune/estimate/schedule.h"

#include <algorithm>
#include <string>

#include "memtune/model/pipeline_layout.h"
#include "schedule_internal.h"

namespace memtune::estimate {
namespace {

using model::ModelConfig;

// Layer counts go straight into the chunk list: chunks[r * v + c].num_layers is the
// transformer layers of rank r, virtual stage c.
using internal::PipelineChunks;

Error LayoutError(const std::string& field, const std::string& message) {
  return InvalidConfig(field, message);
}

// Sets the layer count of every chunk of rank `r`.
void SetChunkCounts(PipelineChunks& out, int r, int layers) {
  for (int c = 0; c < out.vp_size; ++c) {
    out.chunks[static_cast<std::size_t>(r) * out.vp_size + c].num_layers = layers;
  }
}

// MCore get_num_layers_to_build without an explicit layout.
Status CountLayers(const ModelConfig& m, PipelineChunks& out) {
  const int p = m.pipeline_model_parallel_size;
  const int v = m.virtual_pipeline_model_parallel_size.value_or(1);
  const int layers = static_cast<int>(m.num_layers);
  // Layers per rank: `middle` on every rank, except the first/last stage overrides.
  int middle = 0;
  const bool uneven = m.num_layers_in_first_pipeline_stage || m.num_layers_in_last_pipeline_stage;
  if (uneven) {
    int left = layers, stages = p;
    if (m.num_layers_in_first_pipeline_stage) {
      left -= *m.num_layers_in_first_pipeline_stage;
      --stages;
    }
    if (m.num_layers_in_last_pipeline_stage) {
      left -= *m.num_layers_in_last_pipeline_stage;
      --stages;
    }
    if (stages > 0 && (left < 0 || left % stages != 0)) {
      return LayoutError("model.num_layers", std::to_string(left) +
                                                 " layers left after the first/last "
                                                 "stage counts do not divide evenly over " +
                                                 std::to_string(stages) +
                                                 " middle pipeline stages");
    }
    if (stages <= 0 && left != 0) {
      return LayoutError("model.num_layers",
                         "the first/last pipeline stage counts do not cover all " +
                             std::to_string(layers) + " layers");
    }
    middle = stages > 0 ? left / stages : 0;
  } else {
    const int slots = layers + (m.account_for_embedding_in_pipeline_split ? 1 : 0) +
                      (m.account_for_loss_in_pipeline_split ? 1 : 0);
    if (slots % p != 0) {
      return LayoutError("model.num_layers", std::to_string(layers) + " layers (" +
                                                 std::to_string(slots) +
                                                 " with embedding/loss slots) do not divide "
                                                 "evenly over " +
                                                 std::to_string(p) + " pipeline stages");
    }
    middle = slots / p;
  }
  out.pp_size = p;
  out.vp_size = v;
  out.chunks.resize(static_cast<std::size_t>(p) * v);
  const auto& first = m.num_layers_in_first_pipeline_stage;
  const auto& last = m.num_layers_in_last_pipeline_stage;
  for (int r = 0; r < p; ++r) {
    int per_rank = middle;
    if (uneven && r == 0 && first) per_rank = *first;
    if (uneven && r == p - 1 && last) per_rank = *last;
    if (per_rank % v != 0) {
      return LayoutError("model.virtual_pipeline_model_parallel_size",
                         std::to_string(per_rank) + " layers of pipeline rank " +
                             std::to_string(r) + " do not divide over " + std::to_string(v) +
                             " virtual stages");
    }
    SetChunkCounts(out, r, per_rank / v);
  }
  if (!uneven && m.account_for_embedding_in_pipeline_split) out.chunks.front().num_layers -= 1;
  if (!uneven && m.account_for_loss_in_pipeline_split) out.chunks.back().num_layers -= 1;
  return OkStatus();
}

// MCore PipelineParallelLayerLayout: stage i is (vp i / p, rank i % p).
Status CountLayersFromLayout(const ModelConfig& m, PipelineChunks& out, int* mtp_rank,
                             int* mtp_stage, int* mtp_count) {
  MEMTUNE_TRY(auto layout, model::ParsePipelineLayout(m.pipeline_model_parallel_layout,
                                                      m.pipeline_model_parallel_size));
  const auto problems =
      model::ValidatePipelineLayout(layout, m.num_layers, m.mtp_num_layers.value_or(0));
  if (!problems.empty())
    return LayoutError("model.pipeline_model_parallel_layout", problems.front());
  const int p = layout.pipeline_size, v = layout.virtual_pipeline_size;
  out.pp_size = p;
  out.vp_size = v;
  out.chunks.resize(static_cast<std::size_t>(p) * v);
  for (int i = 0; i < static_cast<int>(layout.stages.size()); ++i) {
    const auto& stage = layout.stages[i];
    out.chunks[static_cast<std::size_t>(i % p) * v + i / p].num_layers =
        static_cast<int>(std::count(stage.begin(), stage.end(), 't'));
    const int mtp = static_cast<int>(std::count(stage.begin(), stage.end(), 'm'));
    if (mtp > 0) {
      *mtp_rank = i % p;
      *mtp_stage = i / p;
      *mtp_count = mtp;
    }
  }
  return OkStatus();
}

}  // namespace

namespace internal {

Result<PipelineChunks> BuildPipelineChunks(const ModelConfig& m) {
  const int p = std::max(1, m.pipeline_model_parallel_size);
  int mtp_rank = p - 1, mtp_stage = -1, mtp_count = static_cast<int>(m.mtp_num_layers.value_or(0));
  PipelineChunks out;
  if (!m.pipeline_model_parallel_layout.empty()) {
    MEMTUNE_RETURN_IF_ERROR(CountLayersFromLayout(m, out, &mtp_rank, &mtp_stage, &mtp_count));
  } else {
    MEMTUNE_RETURN_IF_ERROR(CountLayers(m, out));
  }
  const int v = out.vp_size;
  if (mtp_stage < 0) mtp_stage = v - 1;
  int offset = 0;
  for (int c = 0; c < v; ++c) {  // layer order: chunk-major, then rank
    for (int r = 0; r < p; ++r) {
      ModelChunk& chunk = out.chunks[static_cast<std::size_t>(r) * v + c];
      chunk.vp_stage = c;
      chunk.first_layer = offset;
      chunk.has_embedding = (r == 0 && c == 0);
      chunk.has_output = (r == p - 1 && c == v - 1);
      chunk.num_mtp_layers = (r == mtp_rank && c == mtp_stage) ? mtp_count : 0;
      offset += chunk.num_layers;
    }
  }
  if (offset != m.num_layers) {
    return LayoutError("model.num_layers", "the pipeline layout builds " + std::to_string(offset) +
                                               " layers, not " + std::to_string(m.num_layers));
  }
  return out;
}

int NumLayers(std::span<const ModelChunk> chunks) {
  int n = 0;
  for (const auto& c : chunks) n += c.num_layers;
  return n;
}

}  // namespace internal

int StageLayout::NumLayers() const { return internal::NumLayers(chunks); }

Result<std::vector<StageLayout>> BuildPipelineLayout(const ModelConfig& m) {
  MEMTUNE_TRY(const auto flat, internal::BuildPipelineChunks(m));
  std::vector<StageLayout> stages(flat.pp_size);
  for (int r = 0; r < flat.pp_size; ++r) {
    const auto chunks = flat.Stage(r);
    stages[r].pp_rank = r;
    stages[r].chunks.assign(chunks.begin(), chunks.end());
  }
  return stages;
}

int WarmupMicrobatches(int pp_size, int pp_rank, int num_chunks, std::int64_t num_microbatches,
                       int group_size, bool ep_overlap) {
  const std::int64_t total = num_microbatches * num_chunks;
  std::int64_t warmup = 0;
  if (pp_size > 1 && num_chunks == 1) {
    warmup = pp_size - pp_rank - 1;
  } else if (pp_size > 1) {
    warmup = 2LL * (pp_size - pp_rank - 1) + static_cast<std::int64_t>(num_chunks - 1) * group_size;
    if (ep_overlap) warmup += 1;
  }
  return static_cast<int>(std::min(warmup, total));
}

namespace internal {

void FillLiveMicrobatches(int pp_size, int pp_rank, std::int64_t num_microbatches, int group_size,
                          bool ep_overlap, std::span<int> live) {
  const int num_chunks = static_cast<int>(live.size());
  std::fill(live.begin(), live.end(), 0);
  const std::int64_t total = num_microbatches * num_chunks;
  const std::int64_t forwards = std::min<std::int64_t>(
      WarmupMicrobatches(pp_size, pp_rank, num_chunks, num_microbatches, group_size, ep_overlap) +
          1,
      total);
  if (num_chunks == 1) {
    live[0] = static_cast<int>(forwards);
    return;
  }
  // get_schedule_table: groups of G micro-batches; within a group every chunk runs the
  // group's micro-batches before the next chunk (the last group may be shorter).
  const std::int64_t g = std::max(1, group_size);
  std::int64_t seen = 0;
  for (std::int64_t start = 0; start < num_microbatches && seen < forwards; start += g) {
    const std::int64_t in_group = std::min(g, num_microbatches - start);
    for (int c = 0; c < num_chunks && seen < forwards; ++c) {
      const std::int64_t take = std::min(in_group, forwards - seen);
      live[c] += static_cast<int>(take);
      seen += take;
    }
  }
}

}  // namespace internal

std::vector<int> LiveMicrobatchesPerChunk(int pp_size, int pp_rank, int num_chunks,
                                          std::int64_t num_microbatches, int group_size,
                                          bool ep_overlap) {
  std::vector<int> live(num_chunks, 0);
  internal::FillLiveMicrobatches(pp_size, pp_rank, num_microbatches, group_size, ep_overlap, live);
  return live;
}

}  // namespace memtune::estimate
