// Helpers for simulator tests: build a Simulator from a config string, read counters.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "memtune/alloc/simulator.h"

namespace memtune::alloc::testing {

inline Simulator MakeSim(std::string_view conf = "", std::int64_t capacity_bytes = 80 * kGiB,
                         TorchVersion version = kDefaultTorchVersion) {
  auto cfg = ParseAllocatorConfig(conf, version);
  EXPECT_TRUE(cfg.has_value()) << (cfg ? "" : cfg.error().Describe());
  SimulatorOptions options;
  options.config = cfg ? *cfg : AllocatorConfig{};
  options.capacity_bytes = capacity_bytes;
  return Simulator(options);
}

inline std::int64_t Reserved(const Simulator& s) { return All(s.stats().reserved_bytes).current; }
inline std::int64_t Allocated(const Simulator& s) { return All(s.stats().allocated_bytes).current; }
inline std::int64_t Segments(const Simulator& s) { return All(s.stats().segment).current; }

// Allocates and expects success; returns the block's address.
inline std::uint64_t MustAlloc(Simulator& s, HandleId h, std::int64_t bytes, StreamId stream = 0) {
  const AllocResult r = s.Alloc(h, bytes, stream);
  EXPECT_EQ(r.status, AllocStatus::kOk) << "alloc of " << bytes << " bytes: " << s.LastOomMessage();
  const Status inv = s.CheckInvariants();
  EXPECT_TRUE(inv.has_value()) << inv.error().Describe();
  return r.address;
}

inline void MustFree(Simulator& s, HandleId h) {
  EXPECT_EQ(s.Free(h), FreeStatus::kFreed);
  const Status inv = s.CheckInvariants();
  EXPECT_TRUE(inv.has_value()) << inv.error().Describe();
}

}  // namespace memtune::alloc::testing
