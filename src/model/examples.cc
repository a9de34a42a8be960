// Built-in example jobs: the embedded data/examples/*.yaml files.
#include "memtune/model/examples.h"

#include "memtune/core/embedded.h"
#include "memtune/core/suggest.h"

namespace memtune {
extern const EmbeddedFile kExampleFiles[];  // generated from data/examples/*.yaml
}  // namespace memtune

namespace memtune::model {
std::vector<std::string> ExampleNames() { return EmbeddedStems(kExampleFiles); }

Result<std::string> ExampleJobYaml(std::string_view name) {
  if (const char* text = FindEmbeddedStem(kExampleFiles, name)) return std::string(text);
  const std::vector<std::string> names = ExampleNames();
  const std::string suggestion = DidYouMean(name, names);
  return NotFound(
      "--example", "unknown example '" + std::string(name) + "'",
      (suggestion.empty() ? "" : suggestion + " ") + "known examples: " + JoinNames(names));
}

}  // namespace memtune::model
