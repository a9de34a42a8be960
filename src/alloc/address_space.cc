// First-fit device address model (see address_space.h).
#include "alloc/address_space.h"

#include <iterator>

namespace memtune::alloc::internal {

AddressSpace::AddressSpace() { free_[kBase] = kSpan; }

std::uint64_t AddressSpace::Rounded(std::int64_t bytes) {
  const auto b = static_cast<std::uint64_t>(bytes);
  return (b + kAlign - 1) / kAlign * kAlign;
}

std::optional<std::uint64_t> AddressSpace::Allocate(std::int64_t bytes) {
  const std::uint64_t need = Rounded(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const std::uint64_t start = it->first;
    const std::uint64_t rest = it->second - need;
    free_.erase(it);
    if (rest > 0) free_[start + need] = rest;
    return start;
  }
  return std::nullopt;
}

void AddressSpace::Reserve(std::uint64_t address, std::int64_t bytes) {
  const std::uint64_t end = address + Rounded(bytes);
  auto it = free_.upper_bound(address);
  if (it == free_.begin()) return;
  --it;
  const std::uint64_t start = it->first, stop = it->first + it->second;
  if (address < start || end > stop) return;  // not inside one free range: outside the model
  free_.erase(it);
  if (address > start) free_[start] = address - start;
  if (stop > end) free_[end] = stop - end;
}

void AddressSpace::Release(std::uint64_t address, std::int64_t bytes) {
  if (address < kBase || address >= kBase + kSpan) return;
  std::uint64_t start = address, length = Rounded(bytes);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + length) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      length += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = length;
}

}  // namespace memtune::alloc::internal
