// Megatron-Core's `pipeline_model_parallel_layout` string: which layers each (pipeline
// rank, virtual stage) builds. Reproduces MCore
// megatron/core/transformer/pipeline_parallel_layer_layout.py (PipelineParallelLayerLayout
// parse_str_to_list, __init__ and validate_layer_layout).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// One pipeline stage's layers, in order: 'E' embedding, 't' transformer (decoder) layer,
// 'm' MTP layer, 'L' loss.
using PipelineStage = std::string;

// A parsed layout. stages[i] is virtual stage i / PP on pipeline rank i % PP (MCore lists
// stages in layer order: all ranks' first chunks, then all ranks' second chunks, ...).
struct PipelineLayout {
  std::vector<PipelineStage> stages;
  int pipeline_size = 1;          // PP
  int virtual_pipeline_size = 1;  // stages.size() / PP

  // Decoder ('t') layers built by pipeline rank `pp_rank` in virtual stage `vp_stage`.
  int DecoderLayers(int pp_rank, int vp_stage) const;
  // Count of a layer character over all stages.
  std::int64_t Count(char layer) const;
};

// Expands a layout string: commas are dropped, "(X)*n" and "x*n" are unrolled, and the
// result is split at '|' into stages. Errors (field "model.pipeline_model_parallel_layout"):
// an unknown layer character; a stage count that is not a multiple of pipeline_size.
//
// Example: ParsePipelineLayout("Et*2|(t*2|)*2,tL", 2) -> 4 stages, virtual_pipeline_size 2.
Result<PipelineLayout> ParsePipelineLayout(std::string_view layout, int pipeline_size);

// The checks of MCore validate_layer_layout: embedding first and exactly once, loss last and
// exactly once, `num_layers` decoder layers, `mtp_num_layers` MTP layers after all decoder
// layers. Returns one message per violation (empty when the layout is valid).
std::vector<std::string> ValidatePipelineLayout(const PipelineLayout& layout,
                                                std::int64_t num_layers,
                                                std::int64_t mtp_num_layers);

}  // namespace memtune::model
