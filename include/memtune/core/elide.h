// Keeping error lines readable when an input holds a huge value.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace memtune {

// The longest word (a run of characters other than space) ElideLongWords keeps whole.
inline constexpr std::size_t kMaxMessageWordChars = 120;

// `text` with each word longer than `max_word_chars` cut to its first and last characters
// around "...[N bytes]...", so that a message quoting a 10 MiB value stays one readable line
// while the field name, the value's start and what is allowed survive. Short words and the
// spaces between words are unchanged; a cut never splits a UTF-8 sequence.
// Example: with v = "'" + std::string(10 << 20, 'h') + "'", ElideLongWords("GPU " + v) is
// "GPU '" + 63 x 'h' + "...[10,485,762 bytes]..." + 23 x 'h' + "'".
std::string ElideLongWords(std::string_view text,
                           std::size_t max_word_chars = kMaxMessageWordChars);

}  // namespace memtune
