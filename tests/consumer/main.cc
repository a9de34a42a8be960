// Consumer test (scripts/consumer-test): links the installed memtune::memtune, assesses the
// built-in example job (assess::AssessJob: estimate, allocator forecast, verdict per mode)
// and checks the result is plausible. Exit 0 = the package works.
#include <cstdint>
#include <cstdio>
#include <string>

#include "memtune/assess/assess.h"
#include "memtune/core/result.h"
#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace {

constexpr const char* kExample = "llama3-70b-32xh100";  // PP4: one rank class per stage
constexpr int kExpectedRanks = 4;

struct Summary {
  int ranks = 0;
  std::int64_t peak_allocated_bytes = 0;
  int verdicts = 0;          // one per allocator mode
  std::string native_state;  // "fits" | "at_risk" | "oom"
};

// The one library call this test makes: example name -> assessment summary.
memtune::Result<Summary> AssessExample(const std::string& name) {
  namespace assess = memtune::assess;
  MEMTUNE_TRY(std::string text, memtune::model::ExampleJobYaml(name));
  MEMTUNE_TRY(memtune::model::JobDocument doc, memtune::model::ParseJobText(text));
  MEMTUNE_TRY(assess::Assessment a, assess::AssessJob(doc.job));
  const assess::ModeVerdict* native = assess::FindVerdict(a, assess::AllocatorMode::kNative);
  return Summary{static_cast<int>(a.estimate.ranks.size()), a.estimate.peak_allocated_bytes,
                 static_cast<int>(a.verdicts.size()),
                 native == nullptr ? "" : std::string(assess::VerdictStateName(native->state))};
}

}  // namespace

int main() {
  memtune::Result<Summary> summary = AssessExample(kExample);
  if (!summary.has_value()) {
    std::fprintf(stderr, "consumer: %s\n", summary.error().Describe().c_str());
    return 1;
  }
  std::printf("consumer: %s: %d ranks, peak %lld bytes, native %s\n", kExample, summary->ranks,
              static_cast<long long>(summary->peak_allocated_bytes), summary->native_state.c_str());
  if (summary->ranks != kExpectedRanks || summary->peak_allocated_bytes <= 0 ||
      summary->verdicts != 2 || summary->native_state.empty()) {
    std::fprintf(stderr, "consumer: expected %d ranks, a positive peak and two verdicts\n",
                 kExpectedRanks);
    return 1;
  }
  return 0;
}
