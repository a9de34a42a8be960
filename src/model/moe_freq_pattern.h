// Megatron-LM's --moe-layer-freq value: an integer or a Python list expression.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

inline constexpr int kMaxMoeFreqDepth = 100;  // nested parentheses in one expression

// Either "every k-th layer is MoE" (is_list false, `every`) or one 0/1 flag per layer.
struct MoeFreq {
  bool is_list = false;
  int every = 1;
  std::vector<int> pattern;
};

// Parses "2", or a list expression built from integer lists, '+', '*' and parentheses:
// "([0]*3+[1]*58)", "[1,0]*4", "3*[1]" (megatron/training/arguments.py moe_freq_type, which
// evaluates the string as Python).
// Limits (docs/limits.md): parentheses nest at most kMaxMoeFreqDepth deep and the list has at
// most kMaxLayers entries; both are checked while parsing, before a longer list is built.
// Errors: kInvalidInput naming `flag`, quoting the text and giving an example, or naming the
// limit the expression passes.
// Example: ParseMoeFreq("[0]*1+[1]*2", "--moe-layer-freq")->pattern == {0, 1, 1}
Result<MoeFreq> ParseMoeFreq(std::string_view text, std::string_view flag);

}  // namespace memtune::model
