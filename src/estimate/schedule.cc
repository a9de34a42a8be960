// Layers per pipeline rank and model chunk, and the in-flight micro-batch count per chunk.
#include "memtune/estimate/schedule.h"

#include <algorithm>
#include <string>

#include "memtune/model/pipeline_layout.h"

namespace memtune::estimate {
namespace {

using model::ModelConfig;

// counts[r][c]: transformer layers of rank r, virtual stage c.
using LayerCounts = std::vector<std::vector<int>>;

Error LayoutError(const std::string& field, const std::string& message) {
  return InvalidConfig(field, message);
}

// MCore get_num_layers_to_build without an explicit layout.
Result<LayerCounts> CountLayers(const ModelConfig& m) {
  const int p = m.pipeline_model_parallel_size;
  const int v = m.virtual_pipeline_model_parallel_size.value_or(1);
  const int layers = static_cast<int>(m.num_layers);
  std::vector<int> per_rank(p, 0);
  const bool uneven = m.num_layers_in_first_pipeline_stage || m.num_layers_in_last_pipeline_stage;
  if (uneven) {
    int left = layers, stages = p;
    if (m.num_layers_in_first_pipeline_stage) { left -= *m.num_layers_in_first_pipeline_stage; --stages; }
    if (m.num_layers_in_last_pipeline_stage) { left -= *m.num_layers_in_last_pipeline_stage; --stages; }
    if (stages > 0 && (left < 0 || left % stages != 0)) {
      return LayoutError("model.num_layers", std::to_string(left) + " layers left after the first/last "
                         "stage counts do not divide evenly over " + std::to_string(stages) +
                         " middle pipeline stages");
    }
    if (stages <= 0 && left != 0) {
      return LayoutError("model.num_layers", "the first/last pipeline stage counts do not cover all " +
                         std::to_string(layers) + " layers");
    }
    std::fill(per_rank.begin(), per_rank.end(), stages > 0 ? left / stages : 0);
    if (m.num_layers_in_first_pipeline_stage) per_rank.front() = *m.num_layers_in_first_pipeline_stage;
    if (m.num_layers_in_last_pipeline_stage) per_rank.back() = *m.num_layers_in_last_pipeline_stage;
  } else {
    const int slots = layers + (m.account_for_embedding_in_pipeline_split ? 1 : 0) +
                      (m.account_for_loss_in_pipeline_split ? 1 : 0);
    if (slots % p != 0) {
      return LayoutError("model.num_layers", std::to_string(layers) + " layers (" +
                         std::to_string(slots) + " with embedding/loss slots) do not divide "
                         "evenly over " + std::to_string(p) + " pipeline stages");
    }
    std::fill(per_rank.begin(), per_rank.end(), slots / p);
  }
  LayerCounts counts(p, std::vector<int>(v, 0));
  for (int r = 0; r < p; ++r) {
    if (per_rank[r] % v != 0) {
      return LayoutError("model.virtual_pipeline_model_parallel_size",
                         std::to_string(per_rank[r]) + " layers of pipeline rank " +
                         std::to_string(r) + " do not divide over " + std::to_string(v) +
                         " virtual stages");
    }
    std::fill(counts[r].begin(), counts[r].end(), per_rank[r] / v);
  }
  if (!uneven && m.account_for_embedding_in_pipeline_split) counts[0][0] -= 1;
  if (!uneven && m.account_for_loss_in_pipeline_split) counts[p - 1][v - 1] -= 1;
  return counts;
}

// MCore PipelineParallelLayerLayout: stage i is (vp i / p, rank i % p).
Result<LayerCounts> CountLayersFromLayout(const ModelConfig& m, int* mtp_rank, int* mtp_stage,
                                          int* mtp_count) {
  MEMTUNE_TRY(auto layout, model::ParsePipelineLayout(m.pipeline_model_parallel_layout,
                                                      m.pipeline_model_parallel_size));
  const auto problems =
      model::ValidatePipelineLayout(layout, m.num_layers, m.mtp_num_layers.value_or(0));
  if (!problems.empty()) return LayoutError("model.pipeline_model_parallel_layout", problems.front());
  const int p = layout.pipeline_size, v = layout.virtual_pipeline_size;
  LayerCounts counts(p, std::vector<int>(v, 0));
  for (int i = 0; i < static_cast<int>(layout.stages.size()); ++i) {
    const auto& stage = layout.stages[i];
    counts[i % p][i / p] = static_cast<int>(std::count(stage.begin(), stage.end(), 't'));
    const int mtp = static_cast<int>(std::count(stage.begin(), stage.end(), 'm'));
    if (mtp > 0) { *mtp_rank = i % p; *mtp_stage = i / p; *mtp_count = mtp; }
  }
  return counts;
}

}  // namespace

int StageLayout::NumLayers() const {
  int n = 0;
  for (const auto& c : chunks) n += c.num_layers;
  return n;
}

Result<std::vector<StageLayout>> BuildPipelineLayout(const ModelConfig& m) {
  const int p = std::max(1, m.pipeline_model_parallel_size);
  int mtp_rank = p - 1, mtp_stage = -1, mtp_count = static_cast<int>(m.mtp_num_layers.value_or(0));
  LayerCounts counts;
  if (!m.pipeline_model_parallel_layout.empty()) {
    MEMTUNE_TRY(counts, CountLayersFromLayout(m, &mtp_rank, &mtp_stage, &mtp_count));
  } else {
    MEMTUNE_TRY(counts, CountLayers(m));
  }
  const int v = static_cast<int>(counts.front().size());
  if (mtp_stage < 0) mtp_stage = v - 1;
  std::vector<StageLayout> stages(p);
  for (auto& stage : stages) stage.chunks.reserve(v);
  int offset = 0;
  for (int c = 0; c < v; ++c) {      // layer order: chunk-major, then rank
    for (int r = 0; r < p; ++r) {
      ModelChunk chunk;
      chunk.vp_stage = c;
      chunk.first_layer = offset;
      chunk.num_layers = counts[r][c];
      chunk.has_embedding = (r == 0 && c == 0);
      chunk.has_output = (r == p - 1 && c == v - 1);
      chunk.num_mtp_layers = (r == mtp_rank && c == mtp_stage) ? mtp_count : 0;
      offset += chunk.num_layers;
      stages[r].pp_rank = r;
      stages[r].chunks.push_back(chunk);
    }
  }
  if (offset != m.num_layers) {
    return LayoutError("model.num_layers", "the pipeline layout builds " + std::to_string(offset) +
                       " layers, not " + std::to_string(m.num_layers));
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

std::vector<int> LiveMicrobatchesPerChunk(int pp_size, int pp_rank, int num_chunks,
                                          std::int64_t num_microbatches, int group_size,
                                          bool ep_overlap) {
  std::vector<int> live(num_chunks, 0);
  const std::int64_t total = num_microbatches * num_chunks;
  const std::int64_t forwards = std::min<std::int64_t>(
      WarmupMicrobatches(pp_size, pp_rank, num_chunks, num_microbatches, group_size, ep_overlap) + 1,
      total);
  if (num_chunks == 1) {
    live[0] = static_cast<int>(forwards);
    return live;
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
  return live;
}

}  // namespace memtune::estimate
