// Fuzz target: any bytes through the small text readers of the allocator: the
// PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF settings of two releases, a PyTorch release
// name, sizes ("58.8GB", "80GiB"), and the allocation trace format (replayed through the
// simulator with a small capacity, so OOM paths run too). Each must give a value or an
// Error, never crash, hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "memtune/alloc/config.h"
#include "memtune/alloc/replay.h"
#include "memtune/core/units.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  using memtune::alloc::TorchVersion;
  (void)memtune::alloc::ParseAllocatorConfig(text, TorchVersion{2, 1});
  (void)memtune::alloc::ParseAllocatorConfig(text, memtune::alloc::kDefaultTorchVersion);
  (void)memtune::alloc::ParseTorchVersion(text, "fuzz");
  (void)memtune::ParseBytes(text, "fuzz");
  (void)memtune::ParseDeviceBytes(text, "fuzz");
  memtune::alloc::ReplayOptions options;
  memtune::alloc::SimulatorOptions sim;
  sim.capacity_bytes = std::int64_t{1} << 30;
  options.simulators.push_back(sim);
  std::istringstream in(text);
  (void)memtune::alloc::ReplayTrace(in, "fuzz.trace", options);
  return 0;
}
