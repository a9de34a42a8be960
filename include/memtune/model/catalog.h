// The model catalog: architectures of well-known checkpoints, compiled into the binary.
//
// Each entry is a YAML file data/models/<name>.yaml holding `name`, `source` (the URL of the
// Hugging Face config.json or paper it restates), `published_parameters` (the published
// count, its source and, where memtune's count differs, the `relation` between the two),
// `memtune_parameters` (what model::CountParameters gives at TP 1) and a job-format `model:`
// mapping (architecture fields, and the defaults its Megatron-Bridge model bridge sets where
// they differ from memtune's, e.g. the Qwen3 bridges' bias_activation_fusion: false). The
// `model:` mapping is read by the one job parser
// (model/job_parse.h, `model: {preset: NAME}`); this header only serves the files and their
// catalog metadata. docs/catalog.md lists every entry with its sources.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// The text of data/models/<name>.yaml.
// Errors: kNotFound (field "model.preset") naming the preset, with a did-you-mean hint and
// the list of known presets.
// Example: ModelPresetYaml("llama3-70b") -> "# Meta Llama 3 70B: ...\nname: llama3-70b\n..."
Result<std::string> ModelPresetYaml(std::string_view name);

// Every preset name, sorted.
std::vector<std::string> ModelPresetNames();

// The catalog metadata of one preset (everything but the `model:` mapping).
struct ModelPresetInfo {
  std::string name;
  std::string source;                     // URL of the config.json / paper
  std::int64_t published_parameters = 0;  // the published count
  std::string published_source;           // where that count was published
  std::string relation;                   // why memtune's count differs, or "" when equal
  std::int64_t memtune_parameters = 0;    // CountParameters() at TP 1, pinned by tests
};

// Reads the metadata of preset `name`.
// Errors: kNotFound as ModelPresetYaml; kInternal when the embedded file is malformed (a
// build defect: unit tests parse every entry).
Result<ModelPresetInfo> ModelPresetInfoFor(std::string_view name);

}  // namespace memtune::model
