// PyTorch's "CUDA out of memory" error text, byte for byte, per release template
// (docs/shared allocator.md section 6; PyTorch c10/cuda/CUDACachingAllocator.cpp, malloc()).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "memtune/alloc/config.h"

namespace memtune::alloc {

// PyTorch format_size(): "<n> bytes" up to 1024, then KiB / MiB / GiB with two decimals
// (1024 -> "1024 bytes", 1048576 -> "1024.00 KiB", 1 GiB -> "1024.00 MiB").
std::string FormatSize(std::int64_t bytes);

// Everything the message prints, captured when malloc gave up. Bytes throughout.
struct OomReport {
  bool exabyte_request = false;       // request >= 2^60: the short "more than 1EB" text
  std::int64_t requested_bytes = 0;   // orig (unrounded) request
  std::int64_t rounded_bytes = 0;     // round_size(orig); the `oom` trace entry's size
  std::int64_t allocation_bytes = 0;  // get_allocation_size(rounded): "Tried to allocate"
  StreamId stream = 0;
  int device = 0;
  std::int64_t device_total_bytes = 0;        // cudaMemGetInfo total
  std::int64_t device_free_bytes = 0;         // cudaMemGetInfo free, after the cache was released
  std::int64_t allocated_bytes = 0;           // allocated_bytes.all.current
  std::int64_t reserved_bytes = 0;            // reserved_bytes.all.current
  std::int64_t private_pool_free_bytes = 0;   // free blocks of private pools (always 0 here)
  std::optional<std::int64_t> allowed_bytes;  // set when a memory fraction limits the process
  std::optional<std::int64_t> process_bytes;  // NVML "this process" usage; nullopt = no NVML
};

// The message PyTorch `version` raises for `report`. 2.2-2.3 stream the device index as a
// raw char (GPU 0 gives a NUL byte); that byte is reproduced.
// Example (2.4): "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total
// capacity of 80.00 GiB of which 0 bytes is free. ..."
std::string FormatOomMessage(const OomReport& report, TorchVersion version);

}  // namespace memtune::alloc
