// Parsing and validation of MCore's pipeline_model_parallel_layout string.
#include "memtune/model/pipeline_layout.h"

#include <algorithm>
#include <regex>
#include <string>

namespace memtune::model {
namespace {

constexpr const char* kField = "model.pipeline_model_parallel_layout";
// A layout expands to one character per layer; anything longer than this is a typo
// (e.g. "t*99999999"), not a model.
constexpr std::size_t kMaxExpandedChars = 1 << 20;

// Replaces every match of `pattern` (group 1 = text, group 2 = count) by the text repeated
// count times, like Python's re.sub with MCore's lambda. Fails when the result is too long.
Result<std::string> Unroll(const std::string& text, const std::regex& pattern) {
  std::string out;
  auto last = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.append(last, m[0].first);
    const std::string count_text = m[2].str();
    const std::size_t count = count_text.size() > 7 ? kMaxExpandedChars : std::stoul(count_text);
    if (out.size() + m[1].length() * count > kMaxExpandedChars) {
      return InvalidConfig(kField, "the layout expands to more than " +
                                       std::to_string(kMaxExpandedChars) + " layers");
    }
    for (std::size_t i = 0; i < count; ++i) out += m[1].str();
    last = m[0].second;
  }
  out.append(last, text.cend());
  return out;
}

}  // namespace

int PipelineLayout::DecoderLayers(int pp_rank, int vp_stage) const {
  const std::size_t index = static_cast<std::size_t>(vp_stage) * pipeline_size + pp_rank;
  if (index >= stages.size()) return 0;
  return static_cast<int>(std::count(stages[index].begin(), stages[index].end(), 't'));
}

std::int64_t PipelineLayout::Count(char layer) const {
  std::int64_t n = 0;
  for (const PipelineStage& s : stages) n += std::count(s.begin(), s.end(), layer);
  return n;
}

// MCore PipelineParallelLayerLayout.parse_str_to_list and __init__ (stage count % PP).
Result<PipelineLayout> ParsePipelineLayout(std::string_view layout, int pipeline_size) {
  std::string text;
  for (char c : layout) {
    if (c != ',') text += c;  // commas are cosmetic
  }
  static const std::regex kGroup(R"(\(([^)]+)\)\*(\d+))");
  static const std::regex kSingle(R"((.)\*(\d+))");
  MEMTUNE_TRY(text, Unroll(text, kGroup));
  MEMTUNE_TRY(text, Unroll(text, kSingle));

  PipelineLayout parsed;
  parsed.pipeline_size = pipeline_size;
  parsed.stages.emplace_back();
  for (char c : text) {
    if (c == '|') {
      parsed.stages.emplace_back();
    } else if (c == 'E' || c == 'L' || c == 't' || c == 'm') {
      parsed.stages.back() += c;
    } else {
      return InvalidConfig(kField, std::string("invalid layer character '") + c +
                                       "'; known layer characters: E, L, t, m");
    }
  }
  const int num_stages = static_cast<int>(parsed.stages.size());
  if (pipeline_size <= 0 || num_stages % pipeline_size != 0) {
    return InvalidConfig(kField, "the number of stages (" + std::to_string(num_stages) +
                                     ") must be divisible by pipeline_model_parallel_size (" +
                                     std::to_string(pipeline_size) + ")");
  }
  parsed.virtual_pipeline_size = num_stages / pipeline_size;
  return parsed;
}

// MCore PipelineParallelLayerLayout.validate_layer_layout (the checks that do not need the
// process groups).
std::vector<std::string> ValidatePipelineLayout(const PipelineLayout& layout,
                                                std::int64_t num_layers,
                                                std::int64_t mtp_num_layers) {
  std::string flat;
  for (const PipelineStage& s : layout.stages) flat += s;
  std::vector<std::string> errors;
  if (flat.empty() || flat.front() != 'E')
    errors.push_back("the first layer must be embedding (E)");
  if (flat.empty() || flat.back() != 'L') errors.push_back("the last layer must be loss (L)");
  if (layout.Count('E') != 1) errors.push_back("embedding (E) must be specified exactly once");
  if (layout.Count('L') != 1) errors.push_back("loss (L) must be specified exactly once");
  const std::int64_t decoders = layout.Count('t');
  if (decoders != num_layers) {
    errors.push_back("the layout has " + std::to_string(decoders) +
                     " decoder layers (t) but num_layers is " + std::to_string(num_layers));
  }
  const std::int64_t mtps = layout.Count('m');
  if (mtps != mtp_num_layers) {
    errors.push_back("the layout has " + std::to_string(mtps) +
                     " MTP layers (m) but mtp_num_layers is " + std::to_string(mtp_num_layers));
  }
  const std::size_t first_mtp = flat.find('m');
  if (first_mtp != std::string::npos && flat.find('t', first_mtp) != std::string::npos) {
    errors.push_back("decoder layers (t) must be placed before MTP layers (m)");
  }
  return errors;
}

}  // namespace memtune::model
