// Validation cases: parsing, per-rank prediction and the error summary.
#include "memtune/estimate/validate.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace memtune::estimate {
namespace {

TEST(ValidateTest, ParseErrorsNameLineAndField) {
  auto bad_json = ParseValidationCases("\n{not json}\n", "cases.jsonl");
  ASSERT_FALSE(bad_json);
  EXPECT_EQ(bad_json.error().Describe(), "cases.jsonl:2: not valid JSON");
  auto bad_metric = ParseValidationCases(
      R"({"id": "a", "job": {}, "measured": {"metric": "peak", "bytes": 1}})", "c");
  ASSERT_FALSE(bad_metric);
  EXPECT_EQ(bad_metric.error().Describe(),
            "c:1: measured.metric must be one of max_allocated, max_reserved, peak_active, device_used");
  auto bad_rank = ParseValidationCases(
      R"({"id": "a", "job": {}, "measured": {"metric": "max_allocated", "bytes": 1, "rank": "3"}})", "c");
  ASSERT_FALSE(bad_rank);
  EXPECT_EQ(bad_rank.error().Describe(), "c:1: measured.rank must be one of max, rank0, last (got '3')");
}

TEST(ValidateTest, OutOfRangeBytesAndNonStringRankAreErrors) {
  auto parse = [](const std::string& measured) {
    auto cases = ParseValidationCases(R"({"id": "a", "job": {}, "measured": )" + measured + "}", "c");
    return cases ? std::string("ok") : cases.error().Describe();
  };
  // 1e30 and 2^64 - 1 bytes used to become -9223372036854775808 bytes (int64 overflow).
  EXPECT_EQ(parse(R"({"metric": "max_allocated", "bytes": 1e30})"),
            "c:1: measured.bytes must be a number of bytes from 1 to 1,125,899,906,842,624 (got 1e+30)");
  EXPECT_EQ(parse(R"({"metric": "max_allocated", "bytes": 18446744073709551615})"),
            "c:1: measured.bytes must be a number of bytes from 1 to 1,125,899,906,842,624 "
            "(got 18446744073709551615)");
  EXPECT_EQ(parse(R"({"metric": "max_allocated", "bytes": 0})"),
            "c:1: measured.bytes must be a number of bytes from 1 to 1,125,899,906,842,624 (got 0)");
  EXPECT_EQ(parse(R"({"metric": "max_allocated"})"),
            "c:1: measured.bytes must be a number of bytes from 1 to 1,125,899,906,842,624 (got nothing)");
  EXPECT_EQ(parse(R"({"metric": "max_allocated", "bytes": 58800000000})"), "ok");
  // A numeric rank threw nlohmann's type_error (exit 3, "internal error").
  EXPECT_EQ(parse(R"({"metric": "max_allocated", "bytes": 1, "rank": 3})"),
            "c:1: measured.rank must be one of max, rank0, last (got 3)");
}

TEST(ValidateTest, AfterIterationsIsAnOptionalWholeNumber) {
  auto parse = [](const std::string& after) -> std::string {
    auto cases = ParseValidationCases(
        R"({"id": "a", "job": {}, "measured": {"metric": "max_allocated", "bytes": 1, "after_iterations": )" +
            after + "}}",
        "c");
    if (!cases) return cases.error().Describe();
    return std::to_string(cases->front().after_iterations);
  };
  EXPECT_EQ(parse("1"), "1");
  EXPECT_EQ(parse("1000"), "1000");
  for (const char* bad : {"0", "-2", "1.5", "\"1\"", "1001", "null"}) {
    EXPECT_EQ(parse(bad), std::string("c:1: measured.after_iterations must be a whole number of iterations from "
                                      "1 to 1000 (got ") + bad + ")");
  }
  auto absent = ParseValidationCases(R"({"id": "a", "job": {}, "measured": {"metric": "max_allocated", "bytes": 1}})", "c");
  ASSERT_TRUE(absent);
  EXPECT_EQ(absent->front().after_iterations, 0);
}

TEST(ValidateTest, AFileWithoutCasesIsAnError) {
  auto none = ParseValidationCases("# only a comment\n\n", "empty.jsonl");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().Describe(), "empty.jsonl: no validation cases (one JSON object per line expected)");
}

TEST(ValidateTest, CommentsAndBlankLinesAreSkipped) {
  auto cases = ParseValidationCases(
      "# note\n\n" R"({"id": "a", "job": {"model": {}}, "measured": {"metric": "max_reserved", "bytes": 5}})",
      "c");
  ASSERT_TRUE(cases);
  ASSERT_EQ(cases->size(), 1u);
  EXPECT_EQ((*cases)[0].rank, "max");
  EXPECT_EQ((*cases)[0].measured_bytes, 5);
}

std::vector<ValidationCase> PublicCases() {
  std::ifstream in(std::string(MEMTUNE_SOURCE_DIR) + "/tests/data/measured-public.jsonl");
  std::stringstream text;
  text << in.rdbuf();
  auto cases = ParseValidationCases(text.str(), "measured-public.jsonl");
  EXPECT_TRUE(cases);
  return cases ? *cases : std::vector<ValidationCase>{};
}

TEST(ValidateTest, PublicCasesArePredictedOrUnsupportedNeverDropped) {
  const auto cases = PublicCases();
  ASSERT_EQ(cases.size(), 13u);
  ValidateOptions options;
  options.compare = {Mode::kMegatronLm, Mode::kBridge};
  const auto report = Validate(cases, options);
  ASSERT_EQ(report.cases.size(), 13u);
  EXPECT_EQ(report.summary.cases, 13);
  EXPECT_EQ(report.summary.predicted, 8);  // the 5 FSDP2 max_reserved cases are unsupported
  for (const auto& c : report.cases) {
    if (c.measured.metric == "max_reserved") {
      EXPECT_EQ(c.accurate.status, "unsupported") << c.measured.id;
      EXPECT_FALSE(c.accurate.predicted_bytes);
    } else {
      EXPECT_EQ(c.accurate.status, "ok") << c.measured.id << ": " << c.accurate.reason;
    }
    EXPECT_EQ(c.compare.size(), 2u);
  }
  EXPECT_LE(report.summary.median_abs_error_pct, report.summary.p90_abs_error_pct);
  EXPECT_LE(report.summary.p90_abs_error_pct, report.summary.max_abs_error_pct);
}

ValidationCase OneCase(const std::string& metric) {
  auto cases = ParseValidationCases(
      R"({"id": "a", "job": {"model": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, )"
      R"("ffn_hidden_size": 128, "vocab_size": 256, "seq_length": 32}, )"
      R"("train": {"micro_batch_size": 1, "global_batch_size": 1}}, )"
      R"("measured": {"metric": ")" + metric + R"(", "bytes": 1000, "rank": "last"}})",
      "c");
  EXPECT_TRUE(cases) << cases.error().Describe();
  return cases ? cases->front() : ValidationCase{};
}

TEST(ValidateTest, AllocatorMetricsNeedTheReplay) {
  for (const char* metric : {"max_reserved", "device_used", "peak_active"}) {
    const auto report = Validate({OneCase(metric)}, {});
    ASSERT_EQ(report.cases.size(), 1u);
    EXPECT_EQ(report.cases[0].accurate.status, "unsupported");
    EXPECT_EQ(report.cases[0].accurate.reason,
              std::string("metric ") + metric + " needs the allocator simulator (accurate mode only)");
  }
}

TEST(ValidateTest, PeakActiveIsAskedOfTheReplayForTheCasesRank) {
  ValidateOptions options;
  std::string seen_metric, seen_rank;
  options.allocator_metric = [&](const model::Job&, const Estimate&, const std::string& metric,
                                 const std::string& rank, int after) -> Result<std::pair<int, std::int64_t>> {
    seen_metric = metric;
    seen_rank = rank;
    EXPECT_EQ(after, 0);
    return std::pair<int, std::int64_t>{0, 1100};
  };
  const auto report = Validate({OneCase("peak_active")}, options);
  ASSERT_EQ(report.cases.size(), 1u);
  const auto& p = report.cases[0].accurate;
  EXPECT_EQ(p.status, "ok") << p.reason;
  EXPECT_EQ(seen_metric, "peak_active");
  EXPECT_EQ(seen_rank, "last");
  ASSERT_TRUE(p.predicted_bytes);
  EXPECT_EQ(*p.predicted_bytes, 1100);
  ASSERT_TRUE(p.error_pct);
  EXPECT_DOUBLE_EQ(*p.error_pct, 10.0);
}

TEST(ValidateTest, MaxAllocatedAfterAnIterationComesFromTheReplayInAccurateModeOnly) {
  ValidateOptions options;
  options.after_iterations = 1;
  options.compare = {Mode::kMegatronLm};
  int calls = 0, seen_after = -1;
  options.allocator_metric = [&](const model::Job&, const Estimate&, const std::string& metric,
                                 const std::string&, int after) -> Result<std::pair<int, std::int64_t>> {
    ++calls;
    seen_after = after;
    EXPECT_EQ(metric, "max_allocated");
    return std::pair<int, std::int64_t>{0, 900};
  };
  const auto report = Validate({OneCase("max_allocated")}, options);
  ASSERT_EQ(report.cases.size(), 1u);
  EXPECT_EQ(calls, 1);  // accurate only: megatron-lm keeps its formula
  EXPECT_EQ(seen_after, 1);
  ASSERT_TRUE(report.cases[0].accurate.predicted_bytes);
  EXPECT_EQ(*report.cases[0].accurate.predicted_bytes, 900);
  ASSERT_EQ(report.cases[0].compare.size(), 1u);
  EXPECT_NE(report.cases[0].compare[0].predicted_bytes.value_or(900), 900);

  // Without after_iterations, max_allocated is the estimate's and the replay is not asked.
  options.after_iterations = 0;
  calls = 0;
  const auto whole = Validate({OneCase("max_allocated")}, options);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(whole.cases[0].accurate.status, "ok");

  // A case's own measured.after_iterations is used unless the option overrides it.
  ValidationCase own = OneCase("max_allocated");
  own.after_iterations = 10;
  calls = 0;
  Validate({own}, options);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_after, 10);
  options.after_iterations = 2;
  const auto overridden = Validate({own}, options);
  EXPECT_EQ(seen_after, 2);
  EXPECT_EQ(overridden.cases[0].after_iterations, 2);  // what the renderers show

  // Without the allocator simulator a reading after N iterations is refused, naming it.
  options.allocator_metric = nullptr;
  const auto refused = Validate({own}, options);
  EXPECT_EQ(refused.cases[0].accurate.status, "unsupported");
  EXPECT_NE(refused.cases[0].accurate.reason.find("max_allocated after 2 iterations"), std::string::npos)
      << refused.cases[0].accurate.reason;
}

TEST(ValidateTest, RankOverridePicksTheStage) {
  const auto cases = PublicCases();
  ValidateOptions last;
  last.rank_override = "last";
  const auto report = Validate(cases, last);
  for (const auto& c : report.cases) {
    if (c.measured.id == "mb-skill-llama3-70b-sft-fp8-pp8") {
      EXPECT_EQ(c.accurate.pp_rank, 7);
    }
  }
}

}  // namespace
}  // namespace memtune::estimate
