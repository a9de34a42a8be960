// DeviceReplayer: one replay of one device trace under one allocator configuration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memtune/alloc/simulator.h"
#include "snapshot/replay_internal.h"

namespace memtune::snapshot {

struct DeviceReplayerOptions {
  alloc::AllocatorConfig config;
  bool verify = false;                         // compare with the recorded events
  std::optional<std::int64_t> capacity_bytes;  // nullopt: unlimited
  // Recorded reserved bytes before each entry are needed to tell an OOM-retry release
  // (cudaMalloc failed first) from an explicit empty_cache.
  std::int64_t recorded_reserved_at_start = 0;
};

class DeviceReplayer {
 public:
  DeviceReplayer(const Snapshot& snapshot, int device, DeviceReplayerOptions options);

  // Replays the whole trace into `out` (events, mallocs, divergence, replayed outcome;
  // at recorded OOM entries, reserved - allocated lands in recorded_oom_unallocated).
  void Run(DeviceReplay& out);
  std::int64_t recorded_oom_unallocated = -1;

 private:
  struct Recorded {
    std::size_t index;
    const TraceEntry* entry;
  };
  void OnEvent(const alloc::AllocatorEvent& e);
  std::optional<std::uint64_t> Oracle(const alloc::SegmentRequest& request);
  void Malloc(std::size_t i, DeviceReplay& out);
  void FreeRequested(std::size_t i, DeviceReplay& out);
  void FreeCompleted(std::size_t i, DeviceReplay& out);
  void FlushReleases(std::size_t i, DeviceReplay& out);
  bool IsRetryRelease(const TraceEntry& ending) const;
  // Compares what the simulator emitted since the last check with `expected`; `at` is the
  // trace index blamed when the simulator emitted more than was recorded.
  void Compare(const std::vector<Recorded>& expected, std::size_t at, DeviceReplay& out);
  void NoteOom(std::size_t i, std::int64_t rounded, DeviceReplay& out);

  const Snapshot& snapshot_;
  const std::vector<TraceEntry>& trace_;
  DeviceReplayerOptions options_;
  alloc::Simulator sim_;
  HandleMap handles_;
  std::vector<alloc::AllocatorEvent> emitted_;
  std::vector<Recorded> group_;  // segment_* entries since the last malloc/free
  std::size_t next_native_ = 0;  // oracle cursor into group_
  bool expandable_used_ = false;
  std::int64_t build_address_ = -1;  // oracle address while rebuilding the start
  std::int64_t recorded_reserved_ = 0;
  std::vector<std::string> start_notes_;
  bool rebuilt_ = false;
};

// "segment_alloc 0x7f0200000000 100.00 MiB" (alloc: the requested bytes; oom: the size
// and "device_free ...").
std::string DescribeEvent(TraceAction action, std::int64_t addr, std::int64_t size_bytes);

}  // namespace memtune::snapshot
