// PlanChunkLayers: the keep policy (layer_plan.h) over a whole chunk.
#include "tensors/layer_plan.h"

namespace memtune::tensors {

std::vector<LayerPlan> PlanChunkLayers(const model::ModelConfig& m,
                                       const std::vector<bool>& moe_pattern,
                                       const estimate::ModelChunk& chunk) {
  const KeepRules rules = MakeKeepRules(m);
  const int n = chunk.num_layers + chunk.num_mtp_layers;
  std::vector<LayerPlan> layers(n);
  for (int i = 0; i < n; ++i) layers[i] = PlanLayer(m, rules, moe_pattern, chunk, i);
  return layers;
}

}  // namespace memtune::tensors
