// Splitting a shell command line into words, as a POSIX shell would before expansion.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"

namespace memtune::model {

// Splits `text` into words: whitespace (including newlines) separates words; '...' keeps
// everything literally; "..." keeps everything but a backslash before $ ` " \ or a newline;
// outside quotes a backslash quotes the next character and backslash-newline joins lines;
// '#' at the start of a word starts a comment up to the end of the line. Variables ($TP) are
// not expanded: they stay in the word as written.
// Errors: kInvalidInput (field "command line") for an unterminated quote.
// Example: SplitShellWords("a 'b c' \\\n d") -> {"a", "b c", "d"}
Result<std::vector<std::string>> SplitShellWords(std::string_view text);

}  // namespace memtune::model
