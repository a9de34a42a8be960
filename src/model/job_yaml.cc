// Loading YAML/JSON text at the parse boundary: yaml-cpp's exceptions become Errors with
// the source position.
#include "model/job_yaml.h"

#include <map>
#include <mutex>

namespace memtune::model::internal {

Result<YAML::Node> LoadYamlText(std::string_view text, const std::string& source) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    // yaml-cpp marks are 0-based; editors count from 1.
    const std::string where = e.mark.is_null() ? source
                                               : source + ":" + std::to_string(e.mark.line + 1) +
                                                     ":" + std::to_string(e.mark.column + 1);
    return InvalidInput(where, where + ": " + e.msg);
  }
}

Result<YAML::Node> LoadEmbeddedYaml(std::string_view text, const std::string& source) {
  static std::mutex mutex;
  static std::map<std::string, YAML::Node, std::less<>> parsed;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = parsed.find(source);
  if (it == parsed.end()) {
    MEMTUNE_TRY(YAML::Node root, LoadYamlText(text, source));
    it = parsed.emplace(source, std::move(root)).first;
  }
  return YAML::Clone(it->second);
}

}  // namespace memtune::model::internal
