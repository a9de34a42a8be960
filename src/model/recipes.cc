// The recipe catalog: the embedded data/recipes/*.yaml files.
#include "memtune/model/recipes.h"

#include <algorithm>

#include "memtune/core/embedded.h"
#include "memtune/core/suggest.h"

namespace memtune {
extern const EmbeddedFile kRecipeFiles[];  // generated from data/recipes/*.yaml
}  // namespace memtune

namespace memtune::model {
namespace {

constexpr std::string_view kSuffix = ".yaml";

std::string Stem(std::string_view file_name) {
  if (file_name.size() > kSuffix.size() && file_name.ends_with(kSuffix)) {
    file_name.remove_suffix(kSuffix.size());
  }
  return std::string(file_name);
}

}  // namespace

std::vector<std::string> RecipeNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile* f = kRecipeFiles; f->name != nullptr; ++f)
    names.push_back(Stem(f->name));
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> RecipeJobYaml(std::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  for (const EmbeddedFile* f = kRecipeFiles; f->name != nullptr; ++f) {
    if (Stem(f->name) == key) return std::string(f->contents);
  }
  const std::vector<std::string> names = RecipeNames();
  const std::string suggestion = DidYouMean(key, names);
  return NotFound(
      "memtune.recipe",
      "memtune.recipe = '" + std::string(name) + "' is not a recipe memtune knows",
      (suggestion.empty() ? "" : suggestion + " ") + "known recipes: " + JoinNames(names));
}

}  // namespace memtune::model
