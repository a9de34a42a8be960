// Fuzz target: any bytes through the snapshot reader (gzip, pickle, typed snapshot),
// Inspect and Replay. Each must return an error or a report, never crash, hang or exhaust
// memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "memtune/snapshot/inspect.h"
#include "memtune/snapshot/replay.h"
#include "memtune/snapshot/snapshot.h"

namespace {
constexpr std::int64_t kMaxDecompressedBytes = 64 << 20;  // keeps gzip bombs under -rss_limit_mb
constexpr std::size_t kMaxReplayedEntries = 4096;         // keeps one input well under -timeout
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace memtune::snapshot;
  SnapshotLimits limits;
  limits.max_decompressed_bytes = kMaxDecompressedBytes;
  auto snap = LoadSnapshot(std::string(reinterpret_cast<const char*>(data), size), limits);
  if (!snap) return 0;
  InspectOptions options;
  options.frames_depth = 2;
  options.top_sites = 5;
  auto report = Inspect(*snap, options);
  (void)report;
  std::size_t entries = 0;
  for (const auto& trace : snap->device_traces) entries += trace.size();
  if (entries <= kMaxReplayedEntries) {
    auto replay = Replay(*snap);
    (void)replay;
  }
  return 0;
}
