// Real documents: every measured validation case, the built-in example, and the output of
// FormatJobYaml / FormatJobJson (which must parse back to the same job).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "memtune/model/examples.h"
#include "memtune/model/job_emit.h"
#include "memtune/model/job_parse.h"

namespace memtune::model {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The `job` objects of a JSON Lines validation file, as JSON text, with their ids.
std::vector<std::pair<std::string, std::string>> MeasuredJobs(const std::string& file) {
  std::ifstream in(std::string(MEMTUNE_SOURCE_DIR) + "/tests/data/" + file);
  EXPECT_TRUE(in.good()) << file;
  std::vector<std::pair<std::string, std::string>> jobs;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json c = nlohmann::json::parse(line);
    jobs.emplace_back(c.at("id").get<std::string>(), c.at("job").dump());
  }
  return jobs;
}

// Fields that must survive FormatJobYaml -> ParseJobText unchanged.
void ExpectSameJob(const Job& a, const Job& b, const std::string& id) {
  EXPECT_EQ(FormatJobJson({a, {}, {}, {}, {}, {}}), FormatJobJson({b, {}, {}, {}, {}, {}})) << id;
}

void ExpectRoundTrip(const JobDocument& doc, const std::string& id) {
  const std::string yaml = FormatJobYaml(doc);
  auto again = ParseJobText(yaml);
  ASSERT_TRUE(again.has_value()) << id << ": " << again.error().Describe() << "\n" << yaml;
  ExpectSameJob(doc.job, again->job, id);
}

TEST(JobDataTest, EveryMeasuredJobParses) {
  int count = 0;
  for (const char* file : {"measured-public.jsonl", "measured-other.jsonl"}) {
    for (const auto& [id, text] : MeasuredJobs(file)) {
      auto doc = ParseJobText(text);
      ASSERT_TRUE(doc.has_value())
          << id << ": " << doc.error().Describe() << "; " << doc.error().hint;
      // Every field is one memtune reads (warnings may only report Bridge's overrides).
      for (const std::string& f : doc->ignored_fields) {
        EXPECT_EQ(f, "mixed_precision.autocast_enabled") << id;  // no memory effect
      }
      for (const std::string& w : doc->warnings) {
        EXPECT_THAT(w, ::testing::AnyOf(HasSubstr("overrides it"), HasSubstr("trains in fp32")))
            << id;
      }
      EXPECT_GT(doc->job.model.num_layers, 0) << id;
      EXPECT_GT(doc->job.memtune.world_size, 0) << id;
      ExpectRoundTrip(*doc, id);
      ++count;
    }
  }
  EXPECT_EQ(count, 30);
}

TEST(JobDataTest, TheFp8StudyJobIsWhatTheSeedDescribes) {
  for (const auto& [id, text] : MeasuredJobs("measured-public.jsonl")) {
    if (id != "mb-skill-llama3-70b-sft-fp8-base") continue;
    auto doc = ParseJobText(text);
    ASSERT_TRUE(doc.has_value());
    const Job& job = doc->job;
    EXPECT_EQ(job.memtune.framework, Framework::kMegatron);
    EXPECT_TRUE(job.model.fp8_param);
    EXPECT_FALSE(job.ddp.grad_reduce_in_fp32);
    EXPECT_FALSE(job.model.first_last_layers_bf16);
    EXPECT_EQ(DataParallelSize(job), 2);
    EXPECT_EQ(NumMicrobatches(job), 16);
    EXPECT_EQ(PaddedVocabSize(job), 128512);
  }
}

TEST(JobDataTest, ExampleIsTheSeedCase) {
  ASSERT_THAT(ExampleNames(), ::testing::Contains("llama3-70b-32xh100"));
  auto text = ExampleJobYaml("llama3-70b-32xh100");
  ASSERT_TRUE(text.has_value());
  ParseOptions options;
  options.source_name = "example";
  auto doc = ParseJobText(*text, options);
  ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
  const Job& job = doc->job;
  EXPECT_THAT(doc->warnings, IsEmpty());
  EXPECT_EQ(job.model.num_layers, 80);
  EXPECT_EQ(job.model.tensor_model_parallel_size, 4);
  EXPECT_EQ(job.model.pipeline_model_parallel_size, 4);
  EXPECT_EQ(job.model.virtual_pipeline_model_parallel_size, 5);
  EXPECT_EQ(job.model.seq_length, 4096);
  EXPECT_EQ(job.model.recompute_granularity, RecomputeGranularity::kSelective);
  EXPECT_EQ(job.model.fp8, model::Fp8Format::kHybrid);
  EXPECT_EQ(job.model.fp8_recipe, model::Fp8Recipe::kTensorwise);
  EXPECT_TRUE(job.model.fp8_param_gather);
  EXPECT_FALSE(job.model.first_last_layers_bf16);
  EXPECT_FALSE(job.ddp.grad_reduce_in_fp32);
  EXPECT_TRUE(job.ddp.use_distributed_optimizer);
  EXPECT_EQ(job.memtune.gpu, "h100-sxm-80gb");
  EXPECT_EQ(DataParallelSize(job), 2);
  EXPECT_EQ(PaddedVocabSize(job), 128512);
  ExpectRoundTrip(*doc, "example");
}

TEST(JobDataTest, UnknownExampleSuggests) {
  auto text = ExampleJobYaml("llama3-70b-32xh10");
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().message, "unknown example 'llama3-70b-32xh10'");
  EXPECT_EQ(text.error().hint,
            "did you mean 'llama3-70b-32xh100'? known examples: llama3-70b-32xh100");
}

TEST(JobEmitTest, YamlMarksDefaults) {
  auto doc = ParseJobText(
      "model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, vocab_size: 100}\n"
      "mixed_precision: bf16_mixed\n"
      "memtune: {env: {PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True'}}\n");
  ASSERT_TRUE(doc.has_value());
  const std::string yaml = FormatJobYaml(*doc);
  // Comments start at column 46.
  const auto line = [](std::string text, const std::string& comment) {
    text.resize(46, ' ');
    return "\n" + text + comment + "\n";
  };
  EXPECT_THAT(yaml, HasSubstr("\n  num_layers: 2\n"));
  EXPECT_THAT(yaml, HasSubstr(line("  ffn_hidden_size: 256", "# default: 4 * hidden_size")));
  EXPECT_THAT(yaml, HasSubstr(line("  softmax_type: vanilla", "# default")));
  EXPECT_THAT(yaml, HasSubstr(line("  bucket_size: null", "# default")));
  EXPECT_THAT(yaml, HasSubstr("\n  params_dtype: bf16\n"));  // set by the preset
  EXPECT_THAT(yaml, HasSubstr("\nmixed_precision: bf16_mixed\n"));
  EXPECT_THAT(yaml, HasSubstr(line("peft: null", "# full training")));
  EXPECT_THAT(yaml, HasSubstr("\n    PYTORCH_CUDA_ALLOC_CONF: \"expandable_segments:True\"\n"));
  EXPECT_THAT(yaml, ::testing::Not(HasSubstr("fsdp2")));  // a Megatron job
}

TEST(JobEmitTest, JsonHasTheSchema) {
  auto doc = ParseJobText(
      "model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, vocab_size: 100}\n"
      "peft: {dim: 8}\nlogger: {}\n");
  ASSERT_TRUE(doc.has_value());
  const nlohmann::json j = nlohmann::json::parse(FormatJobJson(*doc));
  EXPECT_EQ(j.at("schema"), "memtune.job/1");
  EXPECT_EQ(j.at("job").at("model").at("ffn_hidden_size"), 256);
  EXPECT_EQ(j.at("job").at("peft").at("dim"), 8);
  EXPECT_EQ(j.at("job").at("peft").at("_target_"), "lora");
  EXPECT_EQ(j.at("job").at("mixed_precision"), nullptr);
  EXPECT_EQ(j.at("defaulted_fields").at("model.ffn_hidden_size"), "4 * hidden_size");
  EXPECT_EQ(j.at("ignored_fields"), nlohmann::json::array({"logger"}));
  EXPECT_TRUE(j.at("defaults_used").is_array());
  EXPECT_TRUE(j.at("warnings").is_array());
}

}  // namespace
}  // namespace memtune::model
