// Writing a parsed job back out: the effective values memtune understood, for
// `memtune job` and for tools that want the normalized document.
#pragma once

#include <string>

#include "memtune/model/job_parse.h"

namespace memtune::model {

// The effective job as a YAML job document, every field memtune reads, grouped by section
// (model, train, optimizer, ddp, mixed_precision, peft, dataset, memtune). A field that
// took its default carries "# default" (with the default's origin when it changes memory,
// e.g. "# default: 4 * hidden_size"). Parsing the output again gives the same Job: the
// mixed-precision preset is written by name when one was applied as is; after a custom
// mapping the effective precision fields stand on their own and mixed_precision is null.
std::string FormatJobYaml(const JobDocument& doc);

// The same as JSON, schema "memtune.job/1":
// {"schema": "memtune.job/1", "job": {<sections>}, "defaults_used": [...],
//  "defaulted_fields": {"model.ffn_hidden_size": "4 * hidden_size", ...},
//  "warnings": [...], "ignored_fields": [...]}
// Pretty-printed with two-space indentation, ending in a newline.
std::string FormatJobJson(const JobDocument& doc);

}  // namespace memtune::model
