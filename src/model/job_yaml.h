// YAML entry points shared by the parser and the job composer (flags, --set, Megatron-LM
// arguments). Private to src/model.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "memtune/core/result.h"
#include "memtune/model/job_parse.h"

namespace memtune::model::internal {

// Parses YAML or JSON text into a node tree (an empty text is a null node).
// Error: kInvalidInput, field "<source>:<line>:<column>", message the YAML parser's.
Result<YAML::Node> LoadYamlText(std::string_view text, const std::string& source);

// LoadYamlText for text embedded in the binary (presets, recipes): each `source` is parsed
// once per process and a deep copy returned, which the caller may change. Composing a job
// parsed its preset and recipe anew each time, the larger part of its cost. The text under
// one source name must never change. Thread-safe.
Result<YAML::Node> LoadEmbeddedYaml(std::string_view text, const std::string& source);

// ParseJobText after the text has become a tree: the one parser every input goes through.
Result<JobDocument> ParseJobNode(const YAML::Node& root, const ParseOptions& options);

}  // namespace memtune::model::internal
