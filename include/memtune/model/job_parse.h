// Parsing a job document (docs/job-format.md §1, docs/job.md) into the declared job
// (JobSpec) and, through ResolveJob (model/job_spec.h), the job with effective values.
//
// The document is YAML or JSON with Megatron-Bridge ConfigContainer sections (model,
// train, optimizer, ddp, mixed_precision, peft, dataset) plus memtune's own `memtune:`.
// The parser:
//   - checks every field it uses strictly (type, range, enum value) and names the field
//     path, the value and what is allowed in every error;
//   - ignores the Bridge fields and sections it does not use (listed in ignored_fields),
//     with a "did you mean" warning for a near miss of a field it uses; in `memtune:` an
//     unknown field is an error;
//   - fills absent fields with Megatron-Core / Megatron-Bridge defaults;
//   - applies Bridge's effective-value rules (model.preset / model.hf_config first, then
//     the explicit model fields; the mixed-precision preset copied onto model, optimizer and
//     ddp; distributed-optimizer sync; fp8_param / fp8_param_gather sync; seq_length
//     agreement between model and dataset).
// It does NOT check cross-field consistency (TP divides heads, ...): see model/checks.h.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"
#include "memtune/model/job_spec.h"

namespace memtune::model {

// Reads the file at `path` (already joined with ParseOptions::base_dir) and returns its
// text. Errors: kNotFound naming the path.
using FileReader = std::function<Result<std::string>(const std::string& path)>;

// How to parse one document.
struct ParseOptions {
  // Name of the document in syntax errors ("<source_name>:<line>:<column>"), e.g. the file
  // name as the user typed it.
  std::string source_name = "job";
  // Directory that relative paths in the document (model.hf_config) are relative to;
  // "" = use them as written.
  std::string base_dir;
  // Reads model.hf_config. Empty = read from the local file system. Tests pass an
  // in-memory reader.
  FileReader read_file;
};

// A parsed job and what the parser noticed on the way.
struct JobDocument {
  Job job;  // effective values (rules applied, defaults filled): ResolveJob(spec)
  // The job as declared: edit it and call ResolveJob (model/job_spec.h) for a changed job.
  JobSpec spec;
  // Defaults that change the memory result, one line each:
  // "model.num_query_groups = 64 (default: num_attention_heads)".
  std::vector<std::string> defaults_used;
  // Every field that took its default (path -> where the default comes from, e.g.
  // "model.ffn_hidden_size" -> "4 * hidden_size"; "" when it is a plain constant).
  std::map<std::string, std::string> defaulted_fields;
  // Document paths memtune does not use ("checkpoint", "model.rotary_base"), for --verbose.
  std::vector<std::string> ignored_fields;
  // Things the user should see: did-you-mean for near-miss field names, Bridge's
  // effective-value rules that changed a value the document set.
  std::vector<std::string> warnings;
};

// Parses a YAML or JSON job document.
// Errors: kInvalidInput for malformed YAML/JSON ("job.yaml:3:7: ...", field = source
// position), wrong types and unknown enum values; kInvalidConfig for out-of-range sizes,
// disagreeing seq_length, a missing required architecture field; kNotFound for an unknown
// model.preset or an unreadable model.hf_config. Never throws.
//
// Example:
//   auto doc = ParseJobText("model: {preset: llama3-8b}\nmemtune: {world_size: 8}\n");
//   if (doc) UseJob(doc->job);
Result<JobDocument> ParseJobText(std::string_view text, const ParseOptions& options = {});

// Names of the Bridge mixed-precision presets memtune knows (training/mixed_precision.py),
// sorted. Each also accepts hyphens for underscores, as Bridge does.
std::vector<std::string> MixedPrecisionPresetNames();

}  // namespace memtune::model
