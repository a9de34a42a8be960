#include "memtune/core/suggest.h"

#include <gtest/gtest.h>

namespace memtune {
namespace {

TEST(SuggestTest, EditDistance) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("same", "same"), 0u);
}

TEST(SuggestTest, SuggestsCloseNamesOnly) {
  const std::vector<std::string> names = {"hidden_size", "num_layers", "seq_length"};
  EXPECT_EQ(Suggest("hiden_size", names), "hidden_size");
  EXPECT_EQ(DidYouMean("num_layer", names), "did you mean 'num_layers'?");
  EXPECT_EQ(Suggest("learning_rate", names), "");
}

}  // namespace
}  // namespace memtune
