// Hugging Face config.json -> job-format `model:` mapping, as Megatron-Bridge maps it.
//
// Megatron-Bridge @ 067f987d derives a Megatron model config from the HF config with
// `MegatronModelBridge.CONFIG_MAPPING` (models/conversion/model_bridge.py) and then applies
// each family's bridge (models/{llama,qwen,deepseek,gpt_oss}/*_bridge.py; Mixtral from the
// unmerged Bridge commit 1ee926b3, models/mixtral/mixtral_bridge.py). Fields absent from
// the JSON take the transformers config class default, as Bridge sees them through
// AutoConfig. Only architecture fields are produced.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// The model_type values HfConfigToModelNode accepts, sorted:
// deepseek_v3, gemma, gpt_oss, llama, mistral, mixtral, phi3, qwen2, qwen3, qwen3_moe.
std::vector<std::string> SupportedHfModelTypes();

// Converts the text of a config.json into a job-format `model:` mapping (num_layers,
// hidden_size, ..., MoE and MLA fields, seq_length from max_position_embeddings).
// `field` is the document path of the config ("model.hf_config"); errors name
// "<field>.<json key>".
// Errors: kInvalidInput for malformed JSON, a missing required key or a value of the wrong
// type; kUnsupported for another model_type (the hint lists the supported ones) or a
// hidden_act memtune does not model.
// Example: HfConfigToModelNode(llama3_8b_json, "model.hf_config")["num_layers"] == 32
Result<YAML::Node> HfConfigToModelNode(std::string_view json_text, std::string_view field);

}  // namespace memtune::model
