#include "memtune/core/elide.h"

#include <gtest/gtest.h>

namespace memtune {
namespace {

TEST(ElideTest, ShortTextIsUnchanged) {
  const std::string text = "memtune.gpu: unknown GPU 'h1OO'; did you mean 'H100'?";
  EXPECT_EQ(ElideLongWords(text), text);
  EXPECT_EQ(ElideLongWords(""), "");
  EXPECT_EQ(ElideLongWords("  two  spaces "), "  two  spaces ");
}

TEST(ElideTest, AHugeWordKeepsItsEndsAndItsSize) {
  const std::string value =
      "'" + std::string(64, 'a') + std::string(10 << 20, 'h') + std::string(23, 'z') + "'";
  const std::string out = ElideLongWords("unknown GPU " + value + "; known GPUs: H100");
  EXPECT_EQ(out, "unknown GPU '" + std::string(63, 'a') + "...[10,485,850 bytes]..." +
                     std::string(22, 'z') + "'; known GPUs: H100");
}

TEST(ElideTest, ACutDoesNotSplitAUtf8Sequence) {
  std::string word;
  for (int i = 0; i < 100; ++i) word += "\xC3\xA9";  // U+00E9, two bytes each
  const std::string out = ElideLongWords(word, 10);
  const std::size_t cut = out.find("...[");
  ASSERT_NE(cut, std::string::npos);
  EXPECT_EQ(cut % 2, 0u);                                  // the head ends on a character boundary
  EXPECT_EQ((out.size() - out.find("]...") - 4) % 2, 0u);  // so does the tail's start
}

}  // namespace
}  // namespace memtune
