// The real launch-script facts of ../shared/docs/lint-rules.md (Megatron-LM examples,
// Megatron-Bridge perf recipes, torchtitan's run_train.sh, user lines from issues), written
// as small scripts under tests/data/lint/, linted with the expected findings; and bad input.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "memtune/lint/lint.h"

namespace memtune::lint {
namespace {

const std::string kDir = std::string(MEMTUNE_SOURCE_DIR) + "/tests/data/lint/";

struct DataCase {
  std::string file;
  std::set<std::pair<std::string, int>> expected;  // (rule, line)
  std::string torch_version = "2.9";
  std::string gpu;
  bool estimate = false;
};

DataCase Data(std::string file, std::set<std::pair<std::string, int>> expected,
              std::string torch_version = "2.9", std::string gpu = "", bool estimate = false) {
  DataCase c;
  c.file = std::move(file);
  c.expected = std::move(expected);
  c.torch_version = std::move(torch_version);
  c.gpu = std::move(gpu);
  c.estimate = estimate;
  return c;
}

void PrintTo(const DataCase& c, std::ostream* out) { *out << c.file << " @" << c.torch_version; }

std::vector<DataCase> Cases() {
  return {
      // The three acceptance cases.
      Data("after_command.sh", {{"env.after-command", 8}}),
      Data("lowercase_true.sh", {{"alloc-conf.bool-case", 3}}),
      Data("nccl_ub_expandable.sh", {{"check.alloc.expandable-nccl-ub", 8}}),
      // Megatron-LM examples: the commented-out unprefixed name is not read.
      Data("megatron_llama3_8b_fp8.sh", {}),
      Data("megatron_llama3_uncommented.sh", {{"nccl.avoid-record-streams-prefix", 11}}),
      Data("megatron_fsdp_deepseek.sbatch", {}),
      // Megatron-Bridge perf recipes.
      // The recipe's own TE cross-entropy fusion is a check warning, at the command.
      Data("bridge_llama3_h100.sh",
           {{"check.alloc.expandable-nccl-ub", 14}, {"check.precision.ce-fusion-te", 12}}),
      // A --config-file override YAML: the finding points into it (line 6).
      Data("bridge_config_file.sh", {{"check.offload.pp", 6}}),
      Data("bridge_stream_reuse.sh", {}, "2.8"),
      Data("bridge_stream_reuse.sh", {{"alloc-conf.unknown-option", 4}}, "2.7"),
      // torchtitan's run_train.sh sets only the new name.
      Data("torchtitan_run_train.sh", {{"alloc-conf.new-name-only", 12}}),
      Data("torchtitan_run_train.sh", {{"alloc-conf.new-name-only", 12}}, "2.8"),
      Data("torchtitan_run_train.sh", {}, "main"),
      // User lines from issues.
      Data("issue_mlm606.sh", {}),
      Data("issue_mlm606.sh", {{"estimate.oom", 10}}, "2.9", "a100-40gb", true),
      Data("issue_langptune3.sh", {{"alloc-conf.equals", 4}, {"job.not-built", 5}}),
      Data("issue_automodel1393.sh", {{"alloc-conf.equals", 3}, {"job.not-built", 3}}),
      Data("issue_torchtune1185.sh",
           {{"alloc-conf.whitespace", 5}, {"alloc-conf.unknown-option", 5}}),
      Data("issue_llmfoundry1088.sh", {{"alloc-conf.unknown-option", 3}}),
      Data("issue_torchtitan1558.sh", {}),
      Data("issue_alpaca223.sh", {{"job.not-built", 4}}),
      // Environment files, sourced or alone, and a job document.
      Data("env_only.sh",
           {{"alloc-conf.max-split-expandable", 2}, {"nccl.avoid-record-streams-prefix", 3}}),
      Data("sources_env.sh",
           {{"alloc-conf.max-split-expandable", 2}, {"nccl.avoid-record-streams-prefix", 3}}),
      Data("job_env.yaml", {{"alloc-conf.bool-case", 10}}),
  };
}

class LintDataTest : public testing::TestWithParam<DataCase> {};

TEST_P(LintDataTest, ExpectedFindings) {
  const DataCase& c = GetParam();
  LintOptions options;
  options.torch_version = *alloc::ParseTorchVersion(c.torch_version, "v");
  options.gpu = c.gpu;
  options.estimate = c.estimate;
  Result<LintReport> report = LintFiles({kDir + c.file}, options);
  ASSERT_TRUE(report.has_value()) << report.error().Describe();
  std::set<std::pair<std::string, int>> actual;
  std::string all;
  for (const Finding& f : report->findings) {
    // estimate.oom fires per mode; the other mode's is a warning at the same line.
    actual.insert({f.rule, f.line});
    all += f.rule + " @" + std::to_string(f.line) + ": " + f.message + "\n";
  }
  EXPECT_EQ(actual, c.expected) << all;
}

INSTANTIATE_TEST_SUITE_P(Facts, LintDataTest, testing::ValuesIn(Cases()),
                         [](const testing::TestParamInfo<DataCase>& info) {
                           const DataCase& c = info.param;
                           std::string name = c.file + "_torch" + c.torch_version +
                                              (c.estimate ? "_estimate" : "");
                           for (char& ch : name) ch = std::isalnum(ch) ? ch : '_';
                           return name;
                         });

TEST(LintData, SourcedFindingsNameTheSourcedFile) {
  Result<LintReport> report = LintFiles({kDir + "sources_env.sh"});
  ASSERT_TRUE(report.has_value());
  ASSERT_FALSE(report->findings.empty());
  EXPECT_EQ(report->findings[0].file, "env_only.sh");
}

TEST(LintData, AcceptanceTextAndFix) {
  Result<LintReport> r = LintFiles({kDir + "lowercase_true.sh"});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->findings.size(), 1u);
  EXPECT_EQ(r->findings[0].text, "expandable_segments:true");
  EXPECT_EQ(r->findings[0].column, 8);
  EXPECT_EQ(r->findings[0].fix, "write expandable_segments:True");
  EXPECT_EQ(r->findings[0].severity, Severity::kError);
}

// Bad input: one clear error, never a hang or a crash.
std::string LintError(std::string_view text) {
  Result<LintReport> r = LintText("bad.sh", text);
  return r ? "" : r.error().Describe();
}

TEST(LintBadInput, BinaryFile) {
  EXPECT_EQ(LintError(std::string("#!/bin/bash\n\0\x01\x02", 15)),
            "bad.sh: a binary file (NUL byte at offset 12); allowed: a shell script or a "
            "YAML/JSON job");
}

TEST(LintBadInput, HugeFile) {
  const std::string huge = "#!/bin/bash\n" + std::string(kMaxLintFileBytes, '#');
  EXPECT_NE(LintError(huge).find("larger than 1 MiB"), std::string::npos) << LintError(huge);
}

TEST(LintBadInput, UnbalancedQuote) {
  EXPECT_EQ(LintError("#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True\n"),
            "bad.sh line 2: unterminated ' quote");
}

TEST(LintBadInput, EndlessContinuation) {
  std::string text = "#!/bin/bash\ntorchrun pretrain_gpt.py";
  for (int i = 0; i < 100000; ++i) text += " \\\n";
  text += "\\";
  Result<LintReport> r = LintText("cont.sh", text);
  EXPECT_TRUE(r.has_value()) << r.error().Describe();
}

TEST(LintBadInput, UnreadableFile) {
  Result<LintReport> r = LintFiles({kDir + "no_such_file.sh"});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().Describe().find("no_such_file.sh"), std::string::npos);
}

}  // namespace
}  // namespace memtune::lint
