// Every job of tests/data/measured-public.jsonl (a copy of /work/shared/data/; real runs that
// trained) passes CheckJob, or fails only the rules listed here with the reason the job document,
// not the run, is at fault.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "memtune/model/checks.h"
#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace memtune::model {
namespace {

// case id -> error rules the document trips, each explained.
const std::map<std::string, std::set<std::string>>& ExplainedErrors() {
  static const auto* explained = new std::map<std::string, std::set<std::string>>{
      // The case lists only PYTORCH_CUDA_ALLOC_CONF of the launch environment and infers TE
      // CUDA graphs from the current perf recipe ("the run's setting is not recorded"); that
      // recipe's launch environment also sets NCCL_GRAPH_REGISTER=0, which MCore requires
      // for TE graphs with expandable segments.
      {"mb-skill-llama3-70b-sft-fp8-vpp10", {"alloc.cuda-graph-nccl-register"}},
  };
  return *explained;
}

TEST(MeasuredPublicChecksTest, EveryMeasuredJobPassesOrIsExplained) {
  const std::string path = std::string(MEMTUNE_SOURCE_DIR) + "/tests/data/measured-public.jsonl";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json record = nlohmann::json::parse(line);
    const std::string id = record.at("id").get<std::string>();
    SCOPED_TRACE(id);
    ++cases;
    ParseOptions options;
    options.source_name = id;
    auto doc = ParseJobText(record.at("job").dump(), options);
    ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
    std::set<std::string> errors;
    std::string detail;
    for (const Finding& f : CheckJob(doc->job)) {
      if (f.severity != Severity::kError) continue;
      errors.insert(f.rule_id);
      detail += "\n  " + f.rule_id + ": " + f.message;
    }
    auto it = ExplainedErrors().find(id);
    const std::set<std::string> expected =
        it == ExplainedErrors().end() ? std::set<std::string>{} : it->second;
    EXPECT_EQ(errors, expected) << detail;
  }
  EXPECT_GE(cases, 13);
}

// The built-in example (`memtune check --example llama3-70b-32xh100`) passes; it keeps the
// perf recipe's TE cross-entropy fusion and the measured run's core_attn recompute, which
// upstream warns about.
TEST(MeasuredPublicChecksTest, BuiltInExamplesHaveNoErrors) {
  for (const std::string& name : ExampleNames()) {
    SCOPED_TRACE(name);
    auto text = ExampleJobYaml(name);
    ASSERT_TRUE(text.has_value());
    auto doc = ParseJobText(*text);
    ASSERT_TRUE(doc.has_value()) << doc.error().Describe();
    const std::vector<Finding> findings = CheckJob(doc->job);
    EXPECT_EQ(CountErrors(findings), 0);
    if (name != "llama3-70b-32xh100") continue;
    std::vector<std::string> ids;
    for (const Finding& f : findings) ids.push_back(f.rule_id);
    EXPECT_EQ(ids, (std::vector<std::string>{"recompute.core-attn", "precision.ce-fusion-te"}));
  }
}

}  // namespace
}  // namespace memtune::model
