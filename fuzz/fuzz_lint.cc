// Fuzz target: any bytes through memtune lint (the launch-script reader, the job builder and
// every rule), with a read_file callback that hands back the input itself (so `source`
// recursion is exercised). Each input must return an error or a report, never crash, hang
// or exhaust memory. The first byte picks the PyTorch release, so version-gated parsers run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "memtune/lint/lint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  memtune::lint::LintOptions options;
  options.read_file = [&text](const std::string&) -> memtune::Result<std::string> { return text; };
  const memtune::alloc::TorchVersion kVersions[] = {{2, 4}, {2, 8}, {2, 9}, {2, 99}};
  options.torch_version = kVersions[size == 0 ? 0 : data[0] % 4];
  auto report = memtune::lint::LintText("fuzz.sh", text, options);
  (void)report;
  auto as_job = memtune::lint::LintText("fuzz.yaml", text, options);
  (void)as_job;
  return 0;
}
