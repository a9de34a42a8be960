// Named sizes of PyTorch's CUDA caching allocator (docs/shared allocator.md section 1.1).
//
// PyTorch v2.x c10/cuda/CUDACachingAllocator.cpp, constants at the top of the file
// (kMinBlockSize, kSmallSize, kSmallBuffer, kLargeBuffer, kMinLargeAlloc, kRoundLarge) and
// NativeCachingAllocator::allocate() (the one-exabyte guard). All values are bytes.
#pragma once

#include <cstdint>
#include <limits>

#include "memtune/core/units.h"

namespace memtune::alloc {

inline constexpr std::int64_t kMinBlockSize = 512;  // bytes; every block is a multiple
inline constexpr std::int64_t kSmallSize =
    1 * kMiB;  // bytes; rounded sizes <= this use the small pool
inline constexpr std::int64_t kSmallBuffer =
    2 * kMiB;  // bytes; small segment and small expandable page
inline constexpr std::int64_t kLargeBuffer =
    20 * kMiB;  // bytes; segment for 1-10 MiB requests, large page
inline constexpr std::int64_t kMinLargeAlloc =
    10 * kMiB;  // bytes; requests below get a kLargeBuffer segment
inline constexpr std::int64_t kRoundLarge = 2 * kMiB;  // bytes; larger segments round up to this
inline constexpr std::int64_t kOneExaByte = std::int64_t{1}
                                            << 60;  // bytes; requests >= this fail at once

// PyTorch's max_split_size default is SIZE_MAX ("unlimited"); memtune uses int64 max.
inline constexpr std::int64_t kUnlimitedBytes = std::numeric_limits<std::int64_t>::max();

// roundup_power2_divisions covers 16 power-of-two intervals from 1 MiB (2^20) to 64 GiB.
inline constexpr int kRoundupIntervals = 16;
inline constexpr int kRoundupFirstLog2 = 20;  // log2(1 MiB): interval 0 starts here

// A CUDA stream as PyTorch orders it: the raw cudaStream_t value (0 = legacy default stream).
using StreamId = std::uint64_t;

// Which of a device's two default block pools a block belongs to.
enum class PoolKind : std::uint8_t { kSmall = 0, kLarge = 1 };

}  // namespace memtune::alloc
