// The recipe catalog: the embedded data/recipes/*.yaml files.
#include "memtune/model/recipes.h"

#include <algorithm>

#include "memtune/core/embedded.h"
#include "memtune/core/suggest.h"

namespace memtune {
extern const EmbeddedFile kRecipeFiles[];  // generated from data/recipes/*.yaml
}  // namespace memtune

namespace memtune::model {
std::vector<std::string> RecipeNames() { return EmbeddedStems(kRecipeFiles); }

Result<std::string> RecipeJobYaml(std::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  if (const char* text = FindEmbeddedStem(kRecipeFiles, key)) return std::string(text);
  const std::vector<std::string> names = RecipeNames();
  const std::string suggestion = DidYouMean(key, names);
  return NotFound(
      "memtune.recipe",
      "memtune.recipe = '" + std::string(name) + "' is not a recipe memtune knows",
      (suggestion.empty() ? "" : suggestion + " ") + "known recipes: " + JoinNames(names));
}

}  // namespace memtune::model
