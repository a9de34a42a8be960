// Megatron-Bridge recipes as job documents (data/recipes/<name>.yaml, compiled in): each
// recipe's model, layout, precision, memory levers and launch environment, with its source
// path and commit. A job naming one (`memtune.recipe: NAME`, or `--recipe NAME`) is that
// recipe with the job's own fields on top, as a Bridge override YAML applies to its recipe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// The job document text of recipe `name` (the Bridge function name, e.g.
// "llama3_70b_sft_32gpu_h100_fp8cs_config"; hyphens are read as underscores).
// Errors: kNotFound (field "memtune.recipe") with a did-you-mean hint and the known names.
Result<std::string> RecipeJobYaml(std::string_view name);

// Every recipe name, sorted.
std::vector<std::string> RecipeNames();

}  // namespace memtune::model
