// Lookups in the tables of embedded files (catalogs, examples, recipes).
#include "memtune/core/embedded.h"

#include <algorithm>

namespace memtune {
namespace {

constexpr std::string_view kSuffix = ".yaml";

std::string_view Stem(std::string_view file_name) {
  if (file_name.size() > kSuffix.size() && file_name.ends_with(kSuffix)) {
    file_name.remove_suffix(kSuffix.size());
  }
  return file_name;
}

}  // namespace

std::vector<std::string> EmbeddedStems(const EmbeddedFile* files) {
  std::vector<std::string> names;
  for (const EmbeddedFile* f = files; f->name != nullptr; ++f) names.emplace_back(Stem(f->name));
  std::sort(names.begin(), names.end());
  return names;
}

const char* FindEmbeddedStem(const EmbeddedFile* files, std::string_view stem) {
  for (const EmbeddedFile* f = files; f->name != nullptr; ++f) {
    if (Stem(f->name) == stem) return f->contents;
  }
  return nullptr;
}

}  // namespace memtune
