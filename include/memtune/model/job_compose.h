// Building one job from several inputs, the way the CLI takes them: a job document
// (file or built-in example), a Megatron-LM launch command, flags (--tp, --seq, ...) and
// --set PATH=VALUE overrides. Everything is merged into one document tree, which then goes
// through the one parser (model/job_parse.h), so every input is checked the same way.
#pragma once

#include <string>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job_parse.h"

namespace memtune::model {

// One value set on top of the document.
struct JobOverride {
  std::string path;    // dotted document path of any depth: "model.tensor_model_parallel_size",
                       // "memtune.env.PYTORCH_CUDA_ALLOC_CONF", "mixed_precision"
  std::string value;   // parsed as YAML: "4", "true", "[mlp, core_attn]", "bf16_mixed"
  std::string origin;  // what set it, named in errors: "--tp", "--set"
};

// The inputs of one job, in increasing precedence.
struct JobInputs {
  std::string document;                // YAML or JSON job text; "" = none
  std::string megatron_args;           // a Megatron-LM launch command line; "" = none. Its fields
                                       // override the document's.
  std::vector<JobOverride> overrides;  // applied in order; a later one wins
};

// Merges the inputs and parses the result with ParseJobText's rules.
// Setting a field of a `mixed_precision` preset string turns it into
// {preset: NAME, <field>: VALUE}, i.e. the preset with that field changed.
// Errors: those of ParseJobText, with " (from <origin>)" added when the offending field
// came from an override; kInvalidInput naming the origin for a value that is not valid
// YAML, an empty path, or a path through a non-mapping value; the errors of the
// Megatron-LM argument reader. Its ignored flags are added to ignored_fields.
//
// Example:
//   JobInputs in{.document = text, .overrides = {{"model.tensor_model_parallel_size", "8",
//   "--tp"}}}; Result<JobDocument> doc = ComposeJob(in, {.source_name = "job.yaml"});
Result<JobDocument> ComposeJob(const JobInputs& inputs, const ParseOptions& options = {});

// Whether `text` is a Hugging Face config.json rather than a job document: a JSON object
// with "model_type" and "num_hidden_layers" (or "architectures") at the top level.
bool LooksLikeHfConfig(std::string_view text);

// `text` as a YAML single-quoted scalar ("it's" -> "'it''s'"), for JobOverride::value.
std::string YamlQuoted(std::string_view text);

// The job document that names `path` as its model.hf_config (for a config.json given as
// the job itself or with --hf-config).
std::string HfConfigJobDocument(const std::string& path);

}  // namespace memtune::model
