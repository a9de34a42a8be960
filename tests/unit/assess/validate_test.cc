// Validation cases: parsing, per-rank prediction and the error summary.
#include "memtune/assess/validate.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "memtune/model/gpu_catalog.h"
#include "memtune/model/job_parse.h"
#include "memtune/nonpytorch/non_pytorch.h"

namespace memtune::assess {
namespace {

TEST(ValidateTest, ParseErrorsNameLineAndField) {
  auto bad_json = ParseValidationCases("\n{not json}\n", "cases.jsonl");
  ASSERT_FALSE(bad_json);
  EXPECT_EQ(bad_json.error().Describe().rfind("cases.jsonl:2: is not valid JSON: ", 0), 0u)
      << bad_json.error().Describe();
  auto dup = ParseValidationCases(R"({"id": "a", "id": "b"})", "c");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().Describe(),
            "c:1: duplicate key \"id\" in one object; allowed: each key once per object");
  auto bad_metric = ParseValidationCases(
      R"({"id": "a", "job": {}, "measured": {"metric": "peak", "bytes": 1}})", "c");
  ASSERT_FALSE(bad_metric);
  EXPECT_EQ(
      bad_metric.error().Describe(),
      "c:1: measured.metric must be one of max_allocated, max_reserved, peak_active, device_used, "
      "tokens_per_s_per_gpu, step_time_s, tflops_per_gpu, mfu");
  auto bad_rank = ParseValidationCases(
      R"({"id": "a", "job": {}, "measured": {"metric": "max_allocated", "bytes": 1, "rank": "3"}})",
      "c");
  ASSERT_FALSE(bad_rank);
  EXPECT_EQ(bad_rank.error().Describe(),
            "c:1: measured.rank must be one of max, rank0, last (got '3')");
}

TEST(ValidateTest, ThroughputMeasurementErrorsNameTheField) {
  auto parse = [](const std::string& measured) {
    auto cases =
        ParseValidationCases(R"({"id": "a", "job": {}, "measured": )" + measured + "}", "c");
    return cases ? std::string("ok") : cases.error().Describe();
  };
  EXPECT_EQ(parse(R"({"metric": "tokens_per_s_per_gpu"})"),
            "c:1: measured.value must be a number above 0 for metric tokens_per_s_per_gpu (got "
            "nothing)");
  EXPECT_EQ(parse(R"({"metric": "mfu", "value": 1.5, "flops_formula": "causal"})"),
            "c:1: measured.value must be a number above 0 and at most 1 for metric mfu (got 1.5)");
  EXPECT_EQ(parse(R"({"metric": "tflops_per_gpu", "value": 400, "flops_formula": "half"})"),
            "c:1: measured.flops_formula must be causal or noncausal for metric tflops_per_gpu "
            "(got \"half\")");
  EXPECT_EQ(parse(R"({"metric": "step_time_s", "value": 2.5})"), "ok");
}

TEST(ValidateTest, ThroughputWithoutAGpuIsUnsupportedAndCompareModesHaveNoStepTime) {
  auto cases =
      ParseValidationCases(R"({"id": "a", "group": "g", "job": {"model": {"preset": "llama3-8b"}},)"
                           R"( "measured": {"metric": "step_time_s", "value": 2.5}})",
                           "c");
  ASSERT_TRUE(cases.has_value()) << cases.error().Describe();
  ValidateOptions options;
  options.compare = {Mode::kMegatronLm};
  const ValidationReport report = Validate(*cases, options);
  ASSERT_EQ(report.cases.size(), 1u);
  EXPECT_EQ(report.cases[0].accurate.status, "unsupported");
  EXPECT_NE(report.cases[0].accurate.reason.find("memtune.gpu"), std::string::npos);
  EXPECT_EQ(report.cases[0].compare[0].status, "unsupported");
  EXPECT_EQ(report.throughput.cases, 1);
  EXPECT_EQ(report.throughput.predicted, 0);
  EXPECT_EQ(report.summary.cases, 0);  // memory statistics hold memory cases only
}

TEST(ValidateTest, OutOfRangeBytesAndNonStringRankAreErrors) {
  auto parse = [](const std::string& measured) {
    auto cases =
        ParseValidationCases(R"({"id": "a", "job": {}, "measured": )" + measured + "}", "c");
    return cases ? std::string("ok") : cases.error().Describe();
  };
  // 1e30 and 2^64 - 1 bytes used to become -9223372036854775808 bytes (int64 overflow).
  EXPECT_EQ(
      parse(R"({"metric": "max_allocated", "bytes": 1e30})"),
      "c:1: measured.bytes must be a number of bytes from 1 to 1,125,899,906,842,624 (got 1e+30)");
  EXPECT_EQ(parse(R"({"metric": "max_allocated", "bytes": 18446744073709551615})"),
            "c:1: measured.bytes must be a number of bytes from 1 to 1,125,899,906,842,624 "
            "(got 18446744073709551615)");
  EXPECT_EQ(
      parse(R"({"metric": "max_allocated", "bytes": 0})"),
      "c:1: measured.bytes must be a number of bytes from 1 to 1,125,899,906,842,624 (got 0)");
  EXPECT_EQ(parse(R"({"metric": "max_allocated"})"),
            "c:1: measured.bytes must be a number of bytes from 1 to 1,125,899,906,842,624 (got "
            "nothing)");
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
    EXPECT_EQ(
        parse(bad),
        std::string("c:1: measured.after_iterations must be a whole number of iterations from "
                    "1 to 1000 (got ") +
            bad + ")");
  }
  auto absent = ParseValidationCases(
      R"({"id": "a", "job": {}, "measured": {"metric": "max_allocated", "bytes": 1}})", "c");
  ASSERT_TRUE(absent);
  EXPECT_EQ(absent->front().after_iterations, 0);
}

TEST(ValidateTest, AFileWithoutCasesIsAnError) {
  auto none = ParseValidationCases("# only a comment\n\n", "empty.jsonl");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().Describe(),
            "empty.jsonl: no validation cases (one JSON object per line expected)");
}

TEST(ValidateTest, CommentsAndBlankLinesAreSkipped) {
  auto cases = ParseValidationCases(
      "# note\n\n"
      R"({"id": "a", "job": {"model": {}}, "measured": {"metric": "max_reserved", "bytes": 5}})",
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
  EXPECT_EQ(report.summary.predicted, 13);  // max_reserved from the allocator replay
  for (const auto& c : report.cases) {
    EXPECT_EQ(c.accurate.status, "ok") << c.measured.id << ": " << c.accurate.reason;
    ASSERT_EQ(c.compare.size(), 2u);
    if (c.measured.metric == "max_reserved") {  // the compatibility modes have no allocator
      EXPECT_EQ(c.compare[0].status, "unsupported") << c.measured.id;
      EXPECT_FALSE(c.compare[0].predicted_bytes);
    }
  }
  EXPECT_LE(report.summary.median_abs_error_pct, report.summary.p90_abs_error_pct);
  EXPECT_LE(report.summary.p90_abs_error_pct, report.summary.max_abs_error_pct);
}

ValidationCase OneCase(const std::string& metric) {
  auto cases = ParseValidationCases(
      R"({"id": "a", "job": {"model": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, )"
      R"("ffn_hidden_size": 128, "vocab_size": 256, "seq_length": 32}, )"
      R"("train": {"micro_batch_size": 1, "global_batch_size": 1}}, )"
      R"("measured": {"metric": ")" +
          metric + R"(", "bytes": 1000, "rank": "last"}})",
      "c");
  EXPECT_TRUE(cases) << cases.error().Describe();
  return cases ? cases->front() : ValidationCase{};
}

Prediction Only(const ValidationCase& c, const ValidateOptions& options = {}) {
  const auto report = Validate({c}, options);
  EXPECT_EQ(report.cases.size(), 1u);
  return report.cases.empty() ? Prediction{} : report.cases[0].accurate;
}

TEST(ValidateTest, AllocatorMetricsComeFromTheReplayInAccurateModeOnly) {
  const Prediction allocated = Only(OneCase("max_allocated"));
  ASSERT_EQ(allocated.status, "ok") << allocated.reason;
  for (const char* metric : {"max_reserved", "device_used", "peak_active"}) {
    ValidateOptions options;
    options.compare = {Mode::kMegatronLm};
    const auto report = Validate({OneCase(metric)}, options);
    ASSERT_EQ(report.cases.size(), 1u);
    const Prediction& p = report.cases[0].accurate;
    EXPECT_EQ(p.status, "ok") << metric << ": " << p.reason;
    ASSERT_TRUE(p.predicted_bytes);
    EXPECT_GE(*p.predicted_bytes, *allocated.predicted_bytes) << metric;  // reserved >= allocated
    EXPECT_EQ(p.pp_rank, 0);  // the case's rank "last" of a one-stage job
    ASSERT_EQ(report.cases[0].compare.size(), 1u);
    EXPECT_EQ(report.cases[0].compare[0].status, "unsupported");
    EXPECT_EQ(
        report.cases[0].compare[0].reason,
        std::string("metric ") + metric + " needs the allocator simulator (accurate mode only)");
  }
  // device_used is reserved plus the rank's memory outside PyTorch that the process holds
  // (here a one-GPU job: the CUDA context; the driver's framebuffer reserve is no process's).
  auto on_gpu = [](ValidationCase c) {
    c.job_text.insert(c.job_text.size() - 1, R"(,"memtune":{"gpu":"h100-sxm-80gb"})");
    return c;
  };
  const Prediction reserved = Only(on_gpu(OneCase("max_reserved")));
  const Prediction used = Only(on_gpu(OneCase("device_used")));
  ASSERT_TRUE(reserved.predicted_bytes && used.predicted_bytes) << reserved.reason << used.reason;
  const auto job = model::ParseJobText(on_gpu(OneCase("device_used")).job_text);
  ASSERT_TRUE(job) << job.error().Describe();
  const auto gpu = model::FindGpuEntry("h100-sxm-80gb");
  ASSERT_TRUE(gpu);
  const auto outside = nonpytorch::EstimateNonPytorch(job->job, *gpu, 0);
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->Keys(), (std::vector<std::string>{"driver_reserved", "cuda_context"}));
  EXPECT_EQ(*used.predicted_bytes - *reserved.predicted_bytes,
            outside->TotalBytes() - outside->KeyBytes("driver_reserved"));
  EXPECT_EQ(*used.predicted_bytes - *reserved.predicted_bytes, outside->KeyBytes("cuda_context"));
}

TEST(ValidateTest, MaxAllocatedAfterTheFirstIterationExcludesAdamsMoments) {
  ValidateOptions options;
  options.compare = {Mode::kMegatronLm};
  const auto whole = Validate({OneCase("max_allocated")}, options);
  options.after_iterations = 1;
  const auto first = Validate({OneCase("max_allocated")}, options);
  ASSERT_TRUE(whole.cases[0].accurate.predicted_bytes && first.cases[0].accurate.predicted_bytes);
  // Adam's moments exist only from the first optimizer step on.
  EXPECT_LT(*first.cases[0].accurate.predicted_bytes, *whole.cases[0].accurate.predicted_bytes);
  // megatron-lm keeps its formula, whatever the iteration.
  EXPECT_EQ(first.cases[0].compare[0].predicted_bytes, whole.cases[0].compare[0].predicted_bytes);

  // A case's own measured.after_iterations is used unless the option overrides it.
  ValidationCase own = OneCase("max_allocated");
  own.after_iterations = 1;
  options.after_iterations = 0;
  const auto own_first = Validate({own}, options);
  EXPECT_EQ(own_first.cases[0].after_iterations, 1);
  EXPECT_EQ(own_first.cases[0].accurate.predicted_bytes, first.cases[0].accurate.predicted_bytes);
  options.after_iterations = 2;
  const auto overridden = Validate({own}, options);
  EXPECT_EQ(overridden.cases[0].after_iterations, 2);  // what the renderers show
  ASSERT_TRUE(overridden.cases[0].accurate.predicted_bytes);
  EXPECT_GT(*overridden.cases[0].accurate.predicted_bytes,
            *first.cases[0].accurate.predicted_bytes);
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
}  // namespace memtune::assess
