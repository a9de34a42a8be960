// Fuzz target: any bytes through the diagnose text readers (OOM messages, tracebacks, log
// lines, configuration errors, nvidia-smi output) and the whole diagnosis. Each input must
// return a Diagnosis or an Error, never crash, hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "memtune/diagnose/config_errors.h"
#include "memtune/diagnose/diagnose.h"
#include "memtune/diagnose/log_lines.h"
#include "memtune/diagnose/nvidia_smi.h"
#include "memtune/diagnose/oom_text.h"
#include "memtune/diagnose/traceback.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)memtune::diagnose::FindOomMessages(text);
  (void)memtune::diagnose::FindPhase(text);
  const auto log = memtune::diagnose::ParseLogMemory(text);
  (void)memtune::diagnose::FindLeak(log.samples);
  (void)memtune::diagnose::FindImbalance(log.samples);
  (void)memtune::diagnose::FindConfigErrors(text);
  (void)memtune::diagnose::ParseNvidiaSmi(text);
  auto input = memtune::diagnose::ReadDiagnoseInput("fuzz", text);
  if (input && !input->snapshot) {
    auto diagnosis = memtune::diagnose::Diagnose({*input});
    (void)diagnosis;
  }
  return 0;
}
