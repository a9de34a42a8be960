// Fuzz target: any bytes as a validation file (JSON Lines of measured runs). Parsing must
// give the cases or an Error, never crash, hang or exhaust memory; predicting is left out
// (it runs the estimator, which fuzz_job_document reaches through the job reader).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memtune/assess/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)memtune::assess::ParseValidationCases(text, "fuzz.jsonl");
  return 0;
}
