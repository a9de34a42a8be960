// Bridge's effective-value rules in ParseJobText: mixed-precision presets and mappings,
// fp8_param sync, distributed-optimizer sync, Megatron-FSDP, seq_length agreement.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "memtune/model/checks.h"
#include "memtune/model/job_parse.h"

namespace memtune::model {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr const char* kArch =
    "model: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000}\n";

JobDocument Parse(const std::string& text) {
  auto doc = ParseJobText(std::string(kArch) + text);
  EXPECT_TRUE(doc.has_value()) << doc.error().Describe() << "; " << doc.error().hint;
  return doc ? *doc : JobDocument{};
}

// The warnings other than the fp32-training notice that jobs without precision draw.
std::vector<std::string> Warnings(const JobDocument& doc) {
  std::vector<std::string> out;
  for (const std::string& w : doc.warnings) {
    if (w.find("trains in fp32") == std::string::npos) out.push_back(w);
  }
  return out;
}

std::string ErrorLine(const std::string& text) {
  auto doc = ParseJobText(std::string(kArch) + text);
  EXPECT_FALSE(doc.has_value());
  if (doc) return "";
  return doc.error().hint.empty() ? doc.error().message
                                  : doc.error().message + "; " + doc.error().hint;
}

// The effective precision of one preset, as Bridge's mixed_precision.py builds it.
struct PresetCase {
  const char* name;
  bool bf16;
  bool fp16;
  Dtype params;
  bool grad_reduce_in_fp32;
  const char* fp8;
  const char* fp8_recipe;
  bool fp8_param;
  bool first_last_bf16;
  int start_bf16;
  int end_bf16;
  const char* fp4;
  bool fp4_param;
  bool reuse_grad_buf;
};

class PresetTest : public ::testing::TestWithParam<PresetCase> {};

TEST_P(PresetTest, SetsModelOptimizerAndDdp) {
  const PresetCase& c = GetParam();
  const JobDocument doc = Parse(std::string("mixed_precision: ") + c.name + "\n");
  const Job& job = doc.job;
  EXPECT_EQ(job.mixed_precision, c.name);
  EXPECT_EQ(job.model.bf16, c.bf16);
  EXPECT_EQ(job.model.fp16, c.fp16);
  EXPECT_EQ(job.optimizer.bf16, c.bf16);
  EXPECT_EQ(job.optimizer.fp16, c.fp16);
  EXPECT_EQ(job.model.params_dtype, c.params);
  EXPECT_EQ(job.model.pipeline_dtype, c.params);
  EXPECT_EQ(job.ddp.grad_reduce_in_fp32, c.grad_reduce_in_fp32);
  EXPECT_STREQ(NameOf(job.model.fp8), c.fp8);
  EXPECT_STREQ(NameOf(job.model.fp8_recipe), c.fp8_recipe);
  EXPECT_EQ(job.model.fp8_param, c.fp8_param);
  EXPECT_EQ(job.model.fp8_param_gather, c.fp8_param);
  EXPECT_EQ(job.model.first_last_layers_bf16, c.first_last_bf16);
  EXPECT_EQ(job.model.num_layers_at_start_in_bf16, c.start_bf16);
  EXPECT_EQ(job.model.num_layers_at_end_in_bf16, c.end_bf16);
  EXPECT_STREQ(NameOf(job.model.fp4), c.fp4);
  EXPECT_EQ(job.model.fp4_param, c.fp4_param);
  EXPECT_EQ(job.ddp.reuse_grad_buf_for_mxfp8_param_ag, c.reuse_grad_buf);
  EXPECT_THAT(Warnings(doc), IsEmpty());
}

constexpr Dtype kB = Dtype::kBf16;
constexpr Dtype kH = Dtype::kFp16;
// Megatron-Bridge 067f987d training/mixed_precision.py, one row per @register function.
INSTANTIATE_TEST_SUITE_P(
    Bridge, PresetTest,
    ::testing::Values(PresetCase{"bf16_mixed", true, false, kB, true, "", "tensorwise", false,
                                 false, 0, 0, "", false, false},
                      PresetCase{"fp16_mixed", false, true, kH, false, "", "tensorwise", false,
                                 false, 0, 0, "", false, false},
                      PresetCase{"bf16_with_fp8_delayed_scaling_mixed", true, false, kB, true,
                                 "hybrid", "delayed", true, false, 0, 0, "", false, false},
                      PresetCase{"fp16_with_fp8_delayed_scaling_mixed", false, true, kH, false,
                                 "hybrid", "delayed", true, false, 0, 0, "", false, false},
                      PresetCase{"bf16_with_mxfp8_mixed", true, false, kB, true, "e4m3", "mxfp8",
                                 true, false, 0, 0, "", false, true},
                      PresetCase{"fp16_with_mxfp8_mixed", false, true, kH, false, "e4m3", "mxfp8",
                                 true, false, 0, 0, "", false, true},
                      PresetCase{"bf16_with_fp8_current_scaling_mixed", true, false, kB, true,
                                 "hybrid", "tensorwise", true, true, 1, 1, "", false, false},
                      PresetCase{"nemotron_h_bf16_with_fp8_current_scaling_mixed", true, false, kB,
                                 true, "hybrid", "tensorwise", true, true, 2, 2, "", false, false},
                      PresetCase{"nanov2_bf16_with_fp8_current_scaling_mixed", true, false, kB,
                                 true, "hybrid", "blockwise", true, true, 2, 2, "", false, false},
                      PresetCase{"fp16_with_fp8_current_scaling_mixed", false, true, kH, false,
                                 "hybrid", "tensorwise", true, true, 1, 1, "", false, false},
                      PresetCase{"bf16_with_fp8_subchannel_scaling_mixed", true, false, kB, true,
                                 "hybrid", "blockwise", false, false, 0, 0, "", false, false},
                      PresetCase{"fp16_with_fp8_subchannel_scaling_mixed", false, true, kH, false,
                                 "hybrid", "blockwise", false, false, 0, 0, "", false, false},
                      PresetCase{"bf16_with_nvfp4_mixed", true, false, kB, true, "", "tensorwise",
                                 false, false, 0, 0, "e2m1", true, false},
                      PresetCase{"nemotron_3_super_bf16_with_nvfp4_mixed", true, false, kB, true,
                                 "", "tensorwise", false, true, 0, 14, "e2m1", true, false}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MixedPrecisionTest, EveryPresetIsListed) {
  EXPECT_EQ(MixedPrecisionPresetNames().size(), 14u);
  EXPECT_EQ(MixedPrecisionPresetNames().front(), "bf16_mixed");
}

TEST(MixedPrecisionTest, HyphenatedNamesAreAccepted) {
  EXPECT_EQ(Parse("mixed_precision: bf16-mixed\n").job.mixed_precision, "bf16_mixed");
}

TEST(MixedPrecisionTest, UnknownPresetListsTheAllowedOnes) {
  EXPECT_EQ(ErrorLine("mixed_precision: bf16_mixd\n"),
            "mixed_precision = 'bf16_mixd' is not a Bridge mixed-precision preset; did you mean "
            "'bf16_mixed'? allowed: bf16_mixed, bf16_with_fp8_current_scaling_mixed, "
            "bf16_with_fp8_delayed_scaling_mixed, bf16_with_fp8_subchannel_scaling_mixed, "
            "bf16_with_mxfp8_mixed, bf16_with_nvfp4_mixed, fp16_mixed, "
            "fp16_with_fp8_current_scaling_mixed, fp16_with_fp8_delayed_scaling_mixed, "
            "fp16_with_fp8_subchannel_scaling_mixed, fp16_with_mxfp8_mixed, "
            "nanov2_bf16_with_fp8_current_scaling_mixed, "
            "nemotron_3_super_bf16_with_nvfp4_mixed, "
            "nemotron_h_bf16_with_fp8_current_scaling_mixed");
}

TEST(MixedPrecisionTest, PresetOverridesTheDocumentWithAWarning) {
  // The seed's trap: bf16_mixed forces fp32 gradient reduction over ddp's false.
  const JobDocument doc = Parse(
      "ddp: {grad_reduce_in_fp32: false}\n"
      "mixed_precision: bf16_mixed\n");
  EXPECT_TRUE(doc.job.ddp.grad_reduce_in_fp32);
  EXPECT_THAT(Warnings(doc),
              ElementsAre("mixed_precision 'bf16_mixed' sets ddp.grad_reduce_in_fp32 = true over "
                          "the document's false (Bridge MixedPrecisionConfig.setup overrides it)"));
  EXPECT_EQ(doc.defaulted_fields.count("model.params_dtype"), 0u);
}

TEST(MixedPrecisionTest, MappingStartsFromMixedPrecisionConfigDefaults) {
  auto parsed = ParseJobText(
      "model: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000,\n"
      "        fp8: hybrid}\n"
      "mixed_precision: {bf16: true, params_dtype: bf16, fp8_recipe: delayed}\n");
  ASSERT_TRUE(parsed.has_value());
  const Job& job = parsed->job;
  EXPECT_EQ(job.mixed_precision, "custom");
  EXPECT_TRUE(job.model.bf16);
  EXPECT_EQ(job.model.params_dtype, Dtype::kBf16);
  EXPECT_EQ(job.model.pipeline_dtype, Dtype::kBf16);  // None -> params dtype
  EXPECT_TRUE(job.ddp.grad_reduce_in_fp32);           // MixedPrecisionConfig default
  EXPECT_EQ(job.model.fp8, model::Fp8Format::kNone);  // fp8 None overwrites the model's
  EXPECT_EQ(job.model.fp8_recipe, model::Fp8Recipe::kDelayed);
}

TEST(MixedPrecisionTest, MappingWithPresetChangesSomeFields) {
  const JobDocument doc = Parse(
      "mixed_precision: {preset: bf16_with_fp8_current_scaling_mixed,\n"
      "                  first_last_layers_bf16: false, grad_reduce_in_fp32: false}\n");
  EXPECT_EQ(doc.job.mixed_precision, "custom");
  EXPECT_EQ(doc.job.model.fp8, model::Fp8Format::kHybrid);
  EXPECT_EQ(doc.job.model.fp8_recipe, model::Fp8Recipe::kTensorwise);
  EXPECT_TRUE(doc.job.model.fp8_param);
  EXPECT_FALSE(doc.job.model.first_last_layers_bf16);
  EXPECT_FALSE(doc.job.ddp.grad_reduce_in_fp32);
}

TEST(MixedPrecisionTest, Fp8ParamAndGatherStayInSync) {
  EXPECT_TRUE(
      Parse("mixed_precision: {fp8: hybrid, fp8_param: true}\n").job.model.fp8_param_gather);
  EXPECT_TRUE(
      Parse("mixed_precision: {fp8: hybrid, fp8_param_gather: true}\n").job.model.fp8_param);
  // Both given and disagreeing: fp8_param_gather is assigned last in the dataclass.
  const JobDocument doc =
      Parse("mixed_precision: {fp8: hybrid, fp8_param_gather: false, fp8_param: true}\n");
  EXPECT_FALSE(doc.job.model.fp8_param);
  EXPECT_FALSE(doc.job.model.fp8_param_gather);
  EXPECT_THAT(Warnings(doc), ElementsAre("mixed_precision.fp8_param = true is overridden by "
                                         "fp8_param_gather = false (Bridge MixedPrecisionConfig "
                                         "keeps the two in sync)"));
  // Without a preset, either flag turns both on (Megatron-LM's --fp8-param-gather).
  EXPECT_TRUE(Parse("ddp: {fp8_param_gather: true}\n").job.model.fp8_param);
}

TEST(MixedPrecisionTest, MappingFieldErrorsAndNearMisses) {
  EXPECT_EQ(ErrorLine("mixed_precision: {fp8: e5m2}\n"),
            "mixed_precision.fp8 = 'e5m2' is not a known value; did you mean 'e4m3'? allowed: "
            "hybrid, e4m3");
  EXPECT_EQ(ErrorLine("mixed_precision: {preset: fp32_mixed}\n"),
            "mixed_precision.preset = 'fp32_mixed' is not a Bridge mixed-precision preset; did "
            "you mean 'fp16_mixed'? allowed: bf16_mixed, bf16_with_fp8_current_scaling_mixed, "
            "bf16_with_fp8_delayed_scaling_mixed, bf16_with_fp8_subchannel_scaling_mixed, "
            "bf16_with_mxfp8_mixed, bf16_with_nvfp4_mixed, fp16_mixed, "
            "fp16_with_fp8_current_scaling_mixed, fp16_with_fp8_delayed_scaling_mixed, "
            "fp16_with_fp8_subchannel_scaling_mixed, fp16_with_mxfp8_mixed, "
            "nanov2_bf16_with_fp8_current_scaling_mixed, "
            "nemotron_3_super_bf16_with_nvfp4_mixed, "
            "nemotron_h_bf16_with_fp8_current_scaling_mixed");
  const JobDocument doc = Parse(
      "mixed_precision:\n"
      "  _target_: megatron.bridge.training.mixed_precision.MixedPrecisionConfig\n"
      "  bf16: true\n"
      "  params_dtype: {_target_: torch.bfloat16, _call_: false}\n"
      "  fp8_amax_history_len: 1024\n"
      "  grad_reduce_in_fp23: false\n");
  EXPECT_EQ(doc.job.model.params_dtype, Dtype::kBf16);
  EXPECT_THAT(doc.ignored_fields, Contains("mixed_precision.fp8_amax_history_len"));
  EXPECT_THAT(Warnings(doc), ElementsAre("mixed_precision.grad_reduce_in_fp23 is not a field "
                                         "memtune uses; did you mean 'grad_reduce_in_fp32'? "
                                         "(ignored)"));
}

TEST(DistributedOptimizerTest, EitherSideTurnsBothOn) {
  const JobDocument doc = Parse(
      "ddp: {use_distributed_optimizer: false}\n"
      "optimizer: {use_distributed_optimizer: true}\n");
  EXPECT_TRUE(doc.job.ddp.use_distributed_optimizer);
  EXPECT_TRUE(doc.job.optimizer.use_distributed_optimizer);
  EXPECT_THAT(Warnings(doc), ElementsAre("ddp.use_distributed_optimizer = false and "
                                         "optimizer.use_distributed_optimizer = true disagree; "
                                         "Bridge turns the distributed optimizer on in both"));
  const JobDocument off = Parse("ddp: {use_distributed_optimizer: false}\n");
  EXPECT_FALSE(off.job.optimizer.use_distributed_optimizer);
  EXPECT_THAT(Warnings(off), IsEmpty());
}

TEST(DistributedOptimizerTest, MegatronFsdpForcesIt) {
  const JobDocument doc = Parse("ddp: {use_megatron_fsdp: true}\n");
  EXPECT_TRUE(doc.job.ddp.use_distributed_optimizer);
  EXPECT_TRUE(doc.job.optimizer.use_distributed_optimizer);
  EXPECT_THAT(Warnings(doc), ElementsAre("ddp.use_megatron_fsdp = true turns the distributed "
                                         "optimizer on in ddp and optimizer (Bridge requires it "
                                         "for Megatron-FSDP)"));
}

TEST(DistributedOptimizerTest, OverlapParamGatherSyncs) {
  EXPECT_TRUE(Parse("optimizer: {overlap_param_gather: true}\n").job.ddp.overlap_param_gather);
}

// Runs that trained have dumps where the two disagree: the dataset's length (the real
// batches) is used, and the check rule layout.seq-length-mismatch says so.
TEST(SeqLengthTest, DisagreeingLengthsUseTheDatasetsAndSaySo) {
  const std::string text = std::string(
                               "model: {num_layers: 4, hidden_size: 256, num_attention_heads: 8,\n"
                               "        vocab_size: 1000, seq_length: 4096}\n") +
                           "dataset: {seq_length: 2048}\n";
  auto doc = ParseJobText(text);
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  EXPECT_EQ(doc->job.model.seq_length, 2048);
  EXPECT_EQ(doc->job.model.written_model_seq_length, 4096);
  const std::vector<Finding> findings = CheckJob(doc->job);
  const auto found = std::find_if(findings.begin(), findings.end(), [](const Finding& f) {
    return f.rule_id == "layout.seq-length-mismatch";
  });
  ASSERT_NE(found, findings.end());
  EXPECT_EQ(found->severity, Severity::kWarning);
  EXPECT_EQ(found->message,
            "dataset.seq_length = 2048 does not match model.seq_length = 4096 (Bridge's "
            "ConfigContainer.validate asserts they agree): memtune used the dataset's 2048, "
            "the length of the real batches");
  std::string same = text;
  same.replace(same.find("4096"), 4, "2048");
  auto agree = ParseJobText(same);
  ASSERT_TRUE(agree.has_value()) << agree.error().Describe();
  EXPECT_EQ(agree->job.model.written_model_seq_length, 0);
}

TEST(SeqLengthTest, DatasetAloneSetsTheModel) {
  const JobDocument doc = Parse("dataset: {sequence_length: 2048}\n");
  EXPECT_EQ(doc.job.model.seq_length, 2048);
  EXPECT_EQ(doc.defaulted_fields.count("model.seq_length"), 0u);
}

TEST(CpuOffloadTest, AbsentFractionWarns) {
  const JobDocument doc = Parse("optimizer: {optimizer_cpu_offload: true}\n");
  EXPECT_EQ(doc.job.optimizer.optimizer_offload_fraction, 0.0);
  EXPECT_THAT(Warnings(doc), ElementsAre("optimizer.optimizer_cpu_offload is on but "
                                         "optimizer.optimizer_offload_fraction is absent: MCore "
                                         "OptimizerConfig's default 0.0 offloads nothing "
                                         "(Megatron-LM's --optimizer-offload-fraction defaults "
                                         "to 1.0)"));
}

}  // namespace
}  // namespace memtune::model
