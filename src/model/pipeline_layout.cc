// Parsing and validation of MCore's pipeline_model_parallel_layout string.
#include "memtune/model/pipeline_layout.h"

#include <algorithm>
#include <string>

namespace memtune::model {
namespace {

constexpr const char* kField = "model.pipeline_model_parallel_layout";
// A layout expands to one character per layer; anything longer than this is a typo
// (e.g. "t*99999999"), not a model.
constexpr std::size_t kMaxExpandedChars = 1 << 20;

// Reads the decimal count that starts at text[pos] (at least one digit), saturating just
// above kMaxExpandedChars so a huge count cannot overflow. Returns the index after it.
std::size_t ReadCount(const std::string& text, std::size_t pos, std::size_t* count) {
  *count = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    *count = std::min<std::size_t>(*count * 10 + static_cast<std::size_t>(text[pos] - '0'),
                                   kMaxExpandedChars + 1);
    ++pos;
  }
  return pos;
}

bool IsDigitAt(const std::string& text, std::size_t pos) {
  return pos < text.size() && text[pos] >= '0' && text[pos] <= '9';
}

// Finds the repeat whose text starts at `pos`: "(X)*N" when `grouped` (X has no ')'), else
// "c*N" for any single character but a line break. On a match sets `body` and `count` and
// returns the index after N; otherwise returns pos.
std::size_t MatchRepeat(const std::string& text, std::size_t pos, bool grouped, std::string* body,
                        std::size_t* count) {
  std::size_t star = pos + 1;
  if (grouped) {
    if (text[pos] != '(') return pos;
    const std::size_t close = text.find(')', pos + 1);
    if (close == std::string::npos || close == pos + 1) return pos;
    *body = text.substr(pos + 1, close - pos - 1);
    star = close + 1;
  } else {
    if (text[pos] == '\n' || text[pos] == '\r') return pos;
    *body = text.substr(pos, 1);
  }
  if (star >= text.size() || text[star] != '*' || !IsDigitAt(text, star + 1)) return pos;
  return ReadCount(text, star + 1, count);
}

// Replaces every "(X)*N" (grouped) or "c*N" repeat, leftmost first and without overlap, by
// its text repeated N times, like Python's re.sub with MCore's patterns r"\(([^)]+)\)\*(\d+)"
// and r"(.)\*(\d+)". Hand-written rather than std::regex: libstdc++'s regex recurses once
// per character (a long layout overflowed the stack) and trips GCC 12 -Wmaybe-uninitialized.
// Fails when the result is longer than kMaxExpandedChars.
Result<std::string> Unroll(const std::string& text, bool grouped) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::string body;
    std::size_t count = 0;
    const std::size_t next = MatchRepeat(text, pos, grouped, &body, &count);
    if (next == pos) {
      out += text[pos++];
      continue;
    }
    if (count > kMaxExpandedChars || out.size() + body.size() * count > kMaxExpandedChars) {
      return InvalidConfig(kField, "the layout expands to more than " +
                                       std::to_string(kMaxExpandedChars) + " layers");
    }
    for (std::size_t i = 0; i < count; ++i) out += body;
    pos = next;
  }
  if (out.size() > kMaxExpandedChars) {
    return InvalidConfig(
        kField, "the layout expands to more than " + std::to_string(kMaxExpandedChars) + " layers");
  }
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
  MEMTUNE_TRY(text, Unroll(text, /*grouped=*/true));
  MEMTUNE_TRY(text, Unroll(text, /*grouped=*/false));

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
