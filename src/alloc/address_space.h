// The deterministic device address model: first fit over one virtual range.
// See note [address model] in docs/design/allocator.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace memtune::alloc::internal {

// Hands out 2 MiB-aligned ranges lowest-address-first from [kBase, kBase + kSpan) and takes
// them back (coalescing neighbours), like a cudaMalloc that always reuses the lowest hole.
class AddressSpace {
 public:
  static constexpr std::uint64_t kBase = 0x7f0000000000ULL;  // typical CUDA UVA device range
  // bytes (8 EiB; kBase + kSpan still fits in 64 bits): expandable segments reserve 1.125 x
  // capacity of address space per stream and pool, so at kMaxDeviceBytes (1 PiB, the
  // largest capacity memtune accepts) over 7,000 reservations fit.
  static constexpr std::uint64_t kSpan = 1ULL << 63;
  static constexpr std::uint64_t kAlign = 2ULL << 20;        // bytes (2 MiB)

  AddressSpace();
  // Lowest free range of `bytes` (rounded up to kAlign); nullopt when none is left.
  std::optional<std::uint64_t> Allocate(std::int64_t bytes);
  // Marks [address, address + bytes) as used (an address chosen by an oracle); ranges
  // outside the model's span are ignored.
  void Reserve(std::uint64_t address, std::int64_t bytes);
  // Returns a range obtained from Allocate or Reserve.
  void Release(std::uint64_t address, std::int64_t bytes);

 private:
  static std::uint64_t Rounded(std::int64_t bytes);
  std::map<std::uint64_t, std::uint64_t> free_;  // start -> length
};

}  // namespace memtune::alloc::internal
