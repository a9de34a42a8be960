// A torchtitan TOML training config -> a memtune fsdp2 job document.
//
// torchtitan's TOML configs (torchtitan/models/*/train_configs/*.toml, JobConfig in
// torchtitan/config/job_config.py @ 9dec370) name the model by [model] name + flavor and the
// layout in [parallelism]. The translation reads the subset of TOML those files use
// (tables, `key = value` with strings, integers, floats, booleans and flat arrays) and maps
// the memory-relevant keys onto job fields; the rest are listed as ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model::internal {

// Table headers and `key = value` lines, the header first: a TOML file, not YAML.
bool LooksLikeToml(std::string_view text);

struct TomlJob {
  std::string yaml;                   // the job document
  std::vector<std::string> ignored;   // "training.lr", ... (keys without a memory effect)
  std::vector<std::string> warnings;  // e.g. a selective_ac_option memtune does not model
};

// Translates the config. `source` names the file in errors.
// Errors: kInvalidInput naming "<source>:<line>" for a line outside the subset; kUnsupported
// naming model.name / model.flavor for a model memtune's catalog does not hold (the hint
// lists the supported ones), or a memory-relevant value memtune does not model.
Result<TomlJob> TorchtitanTomlToJob(std::string_view text, const std::string& source);

}  // namespace memtune::model::internal
