// ElideLongWords: huge values quoted in messages, cut to a readable length.
#include "memtune/core/elide.h"

#include <algorithm>

#include "memtune/core/units.h"

namespace memtune {
namespace {

constexpr std::size_t kHeadChars = 64;
constexpr std::size_t kTailChars = 24;

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Moves `at` back to the start of the UTF-8 sequence it falls in.
std::size_t CharStart(std::string_view word, std::size_t at) {
  while (at > 0 && at < word.size() && IsContinuation(word[at])) --at;
  return at;
}

void AppendWord(std::string& out, std::string_view word, std::size_t max_word_chars) {
  if (word.size() <= std::max(max_word_chars, kHeadChars + kTailChars)) {
    out += word;
    return;
  }
  const std::size_t head = CharStart(word, kHeadChars);
  const std::size_t tail = CharStart(word, word.size() - kTailChars);
  out += word.substr(0, head);
  out += "...[" + FormatWithCommas(static_cast<std::int64_t>(word.size())) + " bytes]...";
  out += word.substr(tail);
}

}  // namespace

std::string ElideLongWords(std::string_view text, std::size_t max_word_chars) {
  std::string out;
  out.reserve(std::min(text.size(), std::size_t{4096}));
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      out += ' ';
      ++i;
      continue;
    }
    const std::size_t end = std::min(text.find(' ', i), text.size());
    AppendWord(out, text.substr(i, end - i), max_word_chars);
    i = end;
  }
  return out;
}

}  // namespace memtune
