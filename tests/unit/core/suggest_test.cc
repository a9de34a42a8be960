#include "memtune/core/suggest.h"

#include <gtest/gtest.h>

namespace memtune {
namespace {

TEST(SuggestTest, EditDistance) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("same", "same"), 0u);
}

TEST(SuggestTest, EditDistanceAtMostAgreesWithinTheBound) {
  EXPECT_EQ(EditDistanceAtMost("kitten", "sitting", 3), 3u);
  EXPECT_EQ(EditDistanceAtMost("kitten", "sitting", 2), 3u);  // bound + 1
  EXPECT_EQ(EditDistanceAtMost("kitten", "sitting", 10), 3u);
  EXPECT_EQ(EditDistanceAtMost("", "abc", 1), 2u);
  EXPECT_EQ(EditDistanceAtMost("same", "same", 0), 0u);
  const std::vector<std::string> words = {
      "",       "a",     "ab",          "ba",         "abc",       "acb",
      "hidden", "hiden", "hidden_size", "hiddensize", "num_layers"};
  for (const auto& a : words) {
    for (const auto& b : words) {
      const std::size_t exact = EditDistance(a, b);
      for (std::size_t bound = 0; bound < 13; ++bound) {
        EXPECT_EQ(EditDistanceAtMost(a, b, bound), std::min(exact, bound + 1))
            << a << " / " << b << " bound " << bound;
      }
    }
  }
}

TEST(SuggestTest, AHugeNameGetsNoSuggestion) {
  const std::string huge(10 << 20, 'h');
  EXPECT_EQ(Suggest(huge, {"h100", "h200"}), "");
  EXPECT_EQ(Suggest(std::string(8, 'h') + "100", {"h100", "hhhhhhhh10"}), "hhhhhhhh10");
}

TEST(SuggestTest, SuggestsCloseNamesOnly) {
  const std::vector<std::string> names = {"hidden_size", "num_layers", "seq_length"};
  EXPECT_EQ(Suggest("hiden_size", names), "hidden_size");
  EXPECT_EQ(DidYouMean("num_layer", names), "did you mean 'num_layers'?");
  EXPECT_EQ(Suggest("learning_rate", names), "");
}

}  // namespace
}  // namespace memtune
