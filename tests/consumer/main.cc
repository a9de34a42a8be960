// Consumer test (scripts/consumer-test): links the installed memtune::memtune, estimates the
// built-in example job and checks the result is plausible. Exit 0 = the package works.
#include <cstdint>
#include <cstdio>
#include <string>

#include "memtune/core/result.h"
#include "memtune/estimate/estimate.h"
#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace {

constexpr const char* kExample = "llama3-70b-32xh100";  // PP4: one rank class per stage
constexpr int kExpectedRanks = 4;

struct Summary {
  int ranks = 0;
  std::int64_t peak_allocated_bytes = 0;
};

// The one library call this test makes: example name -> estimate summary.
memtune::Result<Summary> EstimateExample(const std::string& name) {
  MEMTUNE_TRY(std::string text, memtune::model::ExampleJobYaml(name));
  MEMTUNE_TRY(memtune::model::JobDocument doc, memtune::model::ParseJobText(text));
  MEMTUNE_TRY(memtune::estimate::Estimate estimate, memtune::estimate::EstimateMemory(doc.job));
  return Summary{static_cast<int>(estimate.ranks.size()), estimate.peak_allocated_bytes};
}

}  // namespace

int main() {
  memtune::Result<Summary> summary = EstimateExample(kExample);
  if (!summary.has_value()) {
    std::fprintf(stderr, "consumer: %s\n", summary.error().Describe().c_str());
    return 1;
  }
  std::printf("consumer: %s: %d ranks, peak %lld bytes\n", kExample, summary->ranks,
              static_cast<long long>(summary->peak_allocated_bytes));
  if (summary->ranks != kExpectedRanks || summary->peak_allocated_bytes <= 0) {
    std::fprintf(stderr, "consumer: expected %d ranks and a positive peak\n", kExpectedRanks);
    return 1;
  }
  return 0;
}
