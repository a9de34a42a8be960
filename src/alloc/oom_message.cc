// PyTorch's OOM message templates (allocator.md section 6).
#include "memtune/alloc/oom_message.h"

#include <cstdio>

namespace memtune::alloc {
namespace {

std::string Fixed2(double value, const char* unit) {
  // PyTorch streams with std::fixed and precision 2; printf("%.2f") rounds identically.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s", value, unit);
  return buf;
}

constexpr const char* kOldUrl =
    "https://pytorch.org/docs/stable/notes/cuda.html#environment-variables";
constexpr const char* kNewUrl =
    "https://docs.pytorch.org/docs/stable/notes/"
    "cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf";

// "Process <pid> has ..." lines: memtune models one process, the current one.
std::string ProcessInfo(const OomReport& r) {
  if (!r.process_bytes) return "";
  return "Including non-PyTorch memory, this process has " + FormatSize(*r.process_bytes) +
         " memory in use. ";
}

std::string V21(const OomReport& r) {
  // PyTorch 2.1 malloc(): note the "capacty" typo and the max_split_size_mb hint.
  return "CUDA out of memory. Tried to allocate " + FormatSize(r.allocation_bytes) + ". GPU " +
         std::to_string(r.device) + " has a total capacty of " + FormatSize(r.device_total_bytes) +
         " of which " + FormatSize(r.device_free_bytes) + " is free. " + ProcessInfo(r) +
         "Of the allocated memory " + FormatSize(r.allocated_bytes) +
         " is allocated by PyTorch, and " + FormatSize(r.reserved_bytes - r.allocated_bytes) +
         " is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
         "setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
         "Management and PYTORCH_CUDA_ALLOC_CONF";
}

std::string Hint(const char* url) {
  return std::string(
             " If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
             "documentation for Memory Management  (") +
         url + ")";
}

std::string V22(const OomReport& r) {
  // PyTorch 2.2-2.3: the device index is an int8 streamed as a character.
  return "CUDA out of memory. Tried to allocate " + FormatSize(r.allocation_bytes) + ". GPU " +
         std::string(1, static_cast<char>(r.device)) + " has a total capacity of " +
         FormatSize(r.device_total_bytes) + " of which " + FormatSize(r.device_free_bytes) +
         " is free. " + ProcessInfo(r) + "Of the allocated memory " +
         FormatSize(r.allocated_bytes) + " is allocated by PyTorch, and " +
         FormatSize(r.reserved_bytes - r.allocated_bytes) +
         " is reserved by PyTorch but unallocated." + Hint(kOldUrl);
}

std::string V24(const OomReport& r, bool new_url) {
  // PyTorch 2.4+ malloc(): "allowed" and private-pool parts appear only when non-empty.
  const std::int64_t priv = r.private_pool_free_bytes;
  std::string allowed = r.allowed_bytes ? FormatSize(*r.allowed_bytes) + " allowed; " : "";
  std::string private_pools =
      priv > 0 ? "with " + FormatSize(priv) + " allocated in private pools (e.g., CUDA Graphs), "
               : "";
  return "CUDA out of memory. Tried to allocate " + FormatSize(r.allocation_bytes) + ". GPU " +
         std::to_string(r.device) + " has a total capacity of " + FormatSize(r.device_total_bytes) +
         " of which " + FormatSize(r.device_free_bytes) + " is free. " + ProcessInfo(r) + allowed +
         "Of the allocated memory " + FormatSize(r.allocated_bytes + priv) +
         " is allocated by PyTorch, " + private_pools + "and " +
         FormatSize(r.reserved_bytes - r.allocated_bytes - priv) +
         " is reserved by PyTorch but unallocated." + Hint(new_url ? kNewUrl : kOldUrl);
}

}  // namespace

std::string FormatSize(std::int64_t bytes) {
  // PyTorch format_size().
  if (bytes <= 1024) return std::to_string(bytes) + " bytes";
  if (bytes <= 1048576) return Fixed2(static_cast<double>(bytes) / 1024.0, "KiB");
  if (bytes <= 1073741824LL) return Fixed2(static_cast<double>(bytes) / 1048576.0, "MiB");
  return Fixed2(static_cast<double>(bytes) / 1073741824.0, "GiB");
}

std::string FormatOomMessage(const OomReport& report, TorchVersion version) {
  // PyTorch NativeCachingAllocator::allocate(): checked before the allocator runs.
  if (report.exabyte_request) return "CUDA out of memory. Tried to allocate more than 1EB memory.";
  const VersionRules rules = RulesFor(version);
  switch (rules.oom_template) {
    case OomTemplate::kV21:
      return V21(report);
    case OomTemplate::kV22:
      return V22(report);
    case OomTemplate::kV24:
      break;
  }
  return V24(report, rules.oom_docs_pytorch_org_url);
}

}  // namespace memtune::alloc
