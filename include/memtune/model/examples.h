// Built-in example jobs (data/examples/<name>.yaml, compiled into the binary), for
// `memtune <command> --example NAME` and the documentation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// The job document text of example `name` (a file name without ".yaml").
// Errors: kNotFound (field "--example") with a did-you-mean hint and the known names.
// Example: ExampleJobYaml("llama3-70b-32xh100") -> "# Llama3-70B full-parameter SFT ..."
Result<std::string> ExampleJobYaml(std::string_view name);

// Every example name, sorted.
std::vector<std::string> ExampleNames();

}  // namespace memtune::model
