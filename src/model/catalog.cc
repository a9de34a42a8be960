// The model catalog: embedded data/models/*.yaml files and their metadata.
#include "memtune/model/catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "memtune/core/embedded.h"
#include "memtune/core/suggest.h"

namespace memtune {
extern const EmbeddedFile kModelCatalogFiles[];  // generated from data/models/*.yaml
}  // namespace memtune

namespace memtune::model {
namespace {

std::string Text(const YAML::Node& node, const char* key) {
  const YAML::Node value = node[key];
  return value && value.IsScalar() ? value.Scalar() : std::string();
}

}  // namespace

std::vector<std::string> ModelPresetNames() { return EmbeddedStems(kModelCatalogFiles); }

Result<std::string> ModelPresetYaml(std::string_view name) {
  if (const char* text = FindEmbeddedStem(kModelCatalogFiles, name)) return std::string(text);
  const std::vector<std::string> names = ModelPresetNames();
  std::string hint = DidYouMean(name, names);
  hint += std::string(hint.empty() ? "" : " ") + "known presets: " + JoinNames(names);
  return NotFound("model.preset", "unknown model preset '" + std::string(name) + "'", hint);
}

Result<ModelPresetInfo> ModelPresetInfoFor(std::string_view name) {
  MEMTUNE_TRY(const std::string text, ModelPresetYaml(name));
  try {
    const YAML::Node root = YAML::Load(text);
    const YAML::Node published = root["published_parameters"];
    ModelPresetInfo info;
    info.name = Text(root, "name");
    info.source = Text(root, "source");
    info.published_parameters = published["count"].as<std::int64_t>();
    info.published_source = Text(published, "source");
    info.relation = Text(published, "relation");
    info.memtune_parameters = root["memtune_parameters"].as<std::int64_t>();
    return info;
  } catch (const YAML::Exception& e) {
    return Error{ErrorCode::kInternal, "data/models/" + std::string(name) + ".yaml",
                 "malformed catalog entry: " + std::string(e.what()), ""};
  }
}

}  // namespace memtune::model
