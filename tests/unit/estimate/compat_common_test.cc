// Python-float helpers of the compat estimators: sum(), rounding, "%.2f", vocab padding.
#include "estimate/compat_common.h"

#include <gtest/gtest.h>

#include <vector>

namespace memtune::estimate::compat {
namespace {

TEST(CompatCommonTest, PythonSumIsCompensatedLikePython312) {
  // Python 3.12: sum([1e16, 1.0, -1e16]) == 1.0 (3.11 and a naive loop give 0.0).
  const std::vector<double> items = {1e16, 1.0, -1e16};
  EXPECT_EQ(PythonSum(items), 1.0);
  EXPECT_EQ(PythonSum({}), 0.0);
  const std::vector<double> tenths(10, 0.1);
  EXPECT_EQ(PythonSum(tenths), 1.0);  // naive: 0.9999999999999999
}

TEST(CompatCommonTest, RoundsUpstreamBytesToNearest) {
  EXPECT_EQ(RoundToBytes(24734687231.999996), 24734687232);  // x1.15 in the worked example
  EXPECT_EQ(RoundToBytes(52023956275.2), 52023956275);       // x1.05 without_sp
  EXPECT_EQ(RoundToBytes(2.5), 3);
  EXPECT_EQ(RoundToBytes(30348.0), 30348);
}

TEST(CompatCommonTest, FormatsLikePythonTwoDecimals) {
  EXPECT_EQ(FormatFixed2(51975.7734375), "51975.77");
  EXPECT_EQ(FormatFixed2(0.125), "0.12");  // ties go to even on the exact binary value
  EXPECT_EQ(FormatFixed2(0.375), "0.38");
  EXPECT_EQ(FormatBytesPerParameter(6.75), "6.75");
  EXPECT_EQ(FormatBytesPerParameter(18.0), "18");
}

TEST(CompatCommonTest, PadsVocabularyLikeMegatron) {
  EXPECT_EQ(*CalculatePaddedVocabSize(128256, 128, 4), 128512);
  EXPECT_EQ(*CalculatePaddedVocabSize(151936, 128, 4), 152064);
  EXPECT_EQ(*CalculatePaddedVocabSize(32, 1, 2), 32);
  auto bad = CalculatePaddedVocabSize(32, 1, 0);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().Describe(),
            "model.tensor_model_parallel_size: tensor_model_parallel_size must be positive, got 0");
}

TEST(CompatCommonTest, PipelineScheduleFactor) {
  EXPECT_EQ(ApplyPipelineScheduleFactor(100.0, 4, 5, std::nullopt), 100.0 * 1.15);
  EXPECT_EQ(ApplyPipelineScheduleFactor(100.0, 4, std::nullopt, 2), 50.0);
  EXPECT_EQ(ApplyPipelineScheduleFactor(100.0, 4, std::nullopt, 8), 100.0);
  EXPECT_EQ(ApplyPipelineScheduleFactor(100.0, 1, std::nullopt, 1), 100.0);
  EXPECT_EQ(InFlightMicrobatches(4, 5, 16), 5);
  EXPECT_EQ(InFlightMicrobatches(4, std::nullopt, 2), 2);
  EXPECT_EQ(InFlightMicrobatches(4, std::nullopt, std::nullopt), 4);
  EXPECT_EQ(InFlightMicrobatches(1, std::nullopt, 8), 1);
}

}  // namespace
}  // namespace memtune::estimate::compat
