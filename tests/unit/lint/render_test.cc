// The JSON and SARIF renderers: the exact JSON keys, and the fields SARIF 2.1.0's schema
// requires (sarif-schema-2.1.0.json: sarifLog {version, runs}, run {tool}, tool {driver},
// toolComponent {name}, reportingDescriptor {id}, result {message}, message {text},
// region.startLine >= 1, level in none|note|warning|error).
#include "memtune/lint/render.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "memtune/lint/lint.h"

namespace memtune::lint {
namespace {

using nlohmann::json;

LintReport Sample() {
  const char* script =
      "#!/bin/bash\n"
      "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:true\n"
      "export NCCL_AVOID_RECORD_STREAMS=1\n"
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 1024 "
      "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --vocab-size 32000 "
      "--ffn-hidden-size $FFN\n";
  Result<LintReport> r = LintText("train.sh", script);
  EXPECT_TRUE(r.has_value());
  return *r;
}

TEST(LintRender, JsonHasExactlyTheKeys) {
  const json doc = json::parse(RenderJson(Sample()));
  ASSERT_EQ(doc.size(), 1u);
  ASSERT_TRUE(doc["findings"].is_array());
  ASSERT_EQ(doc["findings"].size(), 3u);
  const std::set<std::string> keys = {"rule", "severity", "file", "line",  "column",
                                      "text", "message",  "fix",  "source"};
  for (const json& f : doc["findings"]) {
    std::set<std::string> got;
    for (const auto& [k, v] : f.items()) got.insert(k);
    EXPECT_EQ(got, keys);
    EXPECT_TRUE(f["line"].is_number_integer());
    EXPECT_TRUE(f["source"].contains("repo"));
    EXPECT_TRUE(f["source"].contains("path"));
    EXPECT_TRUE(f["source"].contains("version"));
    const std::string severity = f["severity"];
    EXPECT_TRUE(severity == "error" || severity == "warning" || severity == "info");
  }
  EXPECT_EQ(doc["findings"][0]["rule"], "alloc-conf.bool-case");
  EXPECT_EQ(doc["findings"][0]["line"], 2);
}

TEST(LintRender, SarifHasTheRequiredFields) {
  const json log = json::parse(RenderSarif(Sample()));
  EXPECT_EQ(log["version"], "2.1.0");
  EXPECT_TRUE(log.contains("$schema"));
  ASSERT_TRUE(log["runs"].is_array());
  ASSERT_EQ(log["runs"].size(), 1u);
  const json& run = log["runs"][0];
  const json& driver = run["tool"]["driver"];
  EXPECT_EQ(driver["name"], "memtune lint");
  std::set<std::string> rule_ids;
  for (const json& rule : driver["rules"]) rule_ids.insert(rule["id"].get<std::string>());
  ASSERT_EQ(run["results"].size(), 3u);
  const std::set<std::string> levels = {"none", "note", "warning", "error"};
  for (const json& result : run["results"]) {
    EXPECT_TRUE(rule_ids.contains(result["ruleId"].get<std::string>()));
    EXPECT_EQ(driver["rules"][result["ruleIndex"].get<int>()]["id"], result["ruleId"]);
    EXPECT_TRUE(levels.contains(result["level"].get<std::string>()));
    EXPECT_TRUE(result["message"]["text"].is_string());
    const json& physical = result["locations"][0]["physicalLocation"];
    EXPECT_EQ(physical["artifactLocation"]["uri"], "train.sh");
    EXPECT_GE(physical["region"]["startLine"].get<int>(), 1);
    EXPECT_GE(physical["region"]["startColumn"].get<int>(), 1);
  }
}

TEST(LintRender, SarifFindingWithoutLineHasNoRegion) {
  LintReport report;
  Finding f;
  f.rule = "estimate.oom";
  f.severity = Severity::kError;
  f.file = "job.yaml";
  f.message = "m";
  f.fix = "x";
  report.findings.push_back(f);
  const json log = json::parse(RenderSarif(report));
  const json& physical = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"];
  EXPECT_FALSE(physical.contains("region"));
}

TEST(LintRender, TextEndsWithTheCounts) {
  const std::string text = RenderText(Sample(), 1);
  EXPECT_NE(text.find("train.sh:2:8: error[alloc-conf.bool-case]"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("1 error, 1 warning, 1 info in 1 file\n")) << text;
}

TEST(LintRender, MarkdownListsEveryRule) {
  const std::string md = RenderRulesMarkdown();
  for (const LintRule& r : ListLintRules()) {
    EXPECT_NE(md.find("| `" + std::string(r.id) + "` |"), std::string::npos) << r.id;
  }
  EXPECT_NE(md.find("| `check.offload.pp` |"), std::string::npos);
}

}  // namespace
}  // namespace memtune::lint
