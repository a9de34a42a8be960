// Reading out-of-memory messages from any text: PyTorch's caching-allocator message of every
// release, CUDA runtime "out of memory" errors, NCCL's allocation failures and cuBLAS's
// CUBLAS_STATUS_ALLOC_FAILED. Formats: PyTorch c10/cuda/CUDACachingAllocator.cpp, malloc(),
// across releases (docs/diagnose.md lists them); memtune/alloc/oom_message.h writes them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/model/job.h"

namespace memtune::diagnose {

// Who raised the out-of-memory error.
enum class OomSource {
  kCachingAllocator,  // PyTorch's "CUDA out of memory. Tried to allocate ..."
  kCudaError,         // "CUDA error: out of memory" (a CUDA runtime call outside the allocator)
  kNccl,              // NCCL WARN "Cuda failure 'out of memory'" / "Failed to CUDA calloc"
  kCublas,            // CUBLAS_STATUS_ALLOC_FAILED (cuBLAS workspace or handle)
};

// Which release's wording the allocator message uses.
enum class OomEra {
  kUnknown,          // a message cut short or condensed by the reporter
  kCached,           // PyTorch <= 1.4: "(GPU 0; ... total capacity; ... free; ... cached)"
  kReservedInTotal,  // 1.5 - 2.0: "... reserved in total by PyTorch)"
  kV21,              // 2.1: "GPU 0 has a total capacty of" (sic)
  kV22,              // 2.2 - 2.3: the device index streamed as a raw byte ("GPU  has")
  kCurrent,          // 2.4+: "GPU 0 has a total capacity of ..."
  kExabyte,          // "Tried to allocate more than 1EB memory" (any release)
};
// "unknown", "<=1.4 cached", "1.5-2.0 reserved in total", "2.1", "2.2-2.3", ">=2.4", "1EB".
std::span<const model::EnumName<OomEra>> EnumNames(OomEra);
const char* OomEraName(OomEra era);

// "Process <pid> has <size> memory in use": another process on the same GPU.
struct OtherProcess {
  std::int64_t pid = -1;  // -1 when the message names none
  std::int64_t bytes = 0;
};

// One out-of-memory message and every number it prints, in bytes as printed (PyTorch rounds
// to two decimals of the unit it prints; the values are those decimals times the unit).
struct OomText {
  OomSource source = OomSource::kCachingAllocator;
  OomEra era = OomEra::kUnknown;
  int line = 0;                                    // 1-based line where the message starts
  std::string line_text;                           // that line (an excerpt)
  std::optional<int> device;                       // "GPU 3" (2.2-2.3: the raw byte's value)
  std::optional<int> rank;                         // the line's "[rank3]:" prefix, if any
  std::optional<std::int64_t> requested_bytes;     // "Tried to allocate"
  std::optional<std::int64_t> total_bytes;         // total capacity
  std::optional<std::int64_t> free_bytes;          // free on the device (cudaMemGetInfo)
  std::optional<std::int64_t> process_bytes;       // "this process has ... memory in use"
  std::optional<std::int64_t> allocated_bytes;     // allocated by PyTorch
  std::optional<std::int64_t> reserved_bytes;      // reserved by PyTorch (old forms; else sum)
  std::optional<std::int64_t> unallocated_bytes;   // reserved but unallocated
  std::optional<std::int64_t> private_pool_bytes;  // "allocated in private pools" (2.4+)
  std::optional<std::int64_t> allowed_bytes;       // "... allowed" (a memory fraction is set)
  std::optional<std::int64_t> failed_bytes;        // NCCL "Failed to CUDA calloc N bytes"
  std::vector<OtherProcess> other_processes;
  std::string alloc_conf_variable;  // the hint's variable: PYTORCH_CUDA_ALLOC_CONF / _ALLOC_CONF

  // How many numbers the message gave (requested, total, free, process, allocated, reserved or
  // unallocated): how well it can back a cause.
  int number_count() const;
};

// Every out-of-memory message in `text`, in order. A PyTorch message may span lines (it is
// read up to the next blank line, at most a few lines). Never fails: text without one gives
// an empty list. Example:
//   FindOomMessages("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; ...")
//     .front().requested_bytes == 20 << 20
std::vector<OomText> FindOomMessages(std::string_view text);

// True when `text` mentions running out of memory at all ("out of memory", "OOM",
// "OutOfMemoryError"), numbers or not.
bool MentionsOom(std::string_view text);

}  // namespace memtune::diagnose
