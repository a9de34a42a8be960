// Built-in example jobs: the embedded data/examples/*.yaml files.
#include "memtune/model/examples.h"

#include <algorithm>

#include "memtune/core/embedded.h"
#include "memtune/core/suggest.h"

namespace memtune {
extern const EmbeddedFile kExampleFiles[];  // generated from data/examples/*.yaml
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

std::vector<std::string> ExampleNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile* f = kExampleFiles; f->name != nullptr; ++f)
    names.push_back(Stem(f->name));
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> ExampleJobYaml(std::string_view name) {
  for (const EmbeddedFile* f = kExampleFiles; f->name != nullptr; ++f) {
    if (Stem(f->name) == name) return std::string(f->contents);
  }
  const std::vector<std::string> names = ExampleNames();
  const std::string suggestion = DidYouMean(name, names);
  return NotFound(
      "--example", "unknown example '" + std::string(name) + "'",
      (suggestion.empty() ? "" : suggestion + " ") + "known examples: " + JoinNames(names));
}

}  // namespace memtune::model
