// SiteTable: live bytes per allocation site (the innermost frames of the allocation stack).
#include <algorithm>

#include "snapshot/inspect_internal.h"

namespace memtune::snapshot {

void SiteTable::Add(StackId stack, std::int64_t bytes) {
  Totals& t = by_stack_[stack];
  t.bytes += bytes;
  ++t.count;
}

std::vector<SiteUsage> SiteTable::Top(int n) const {
  // Fold stacks into sites: stacks that share their innermost depth_ frames are one site.
  std::map<std::vector<std::int32_t>, Totals> sites;
  for (const auto& [stack, totals] : by_stack_) {
    std::vector<std::int32_t> key;
    if (stack != kNoStack) {
      const auto& frames = snapshot_.stacks[static_cast<std::size_t>(stack)];
      const std::size_t depth = std::min(frames.size(), static_cast<std::size_t>(depth_));
      key.assign(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(depth));
    }
    Totals& t = sites[key];
    t.bytes += totals.bytes;
    t.count += totals.count;
  }
  std::vector<std::pair<const std::vector<std::int32_t>*, Totals>> order;
  for (const auto& [key, totals] : sites) order.push_back({&key, totals});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.bytes != b.second.bytes) return a.second.bytes > b.second.bytes;
    return a.second.count > b.second.count;
  });
  std::vector<SiteUsage> out;
  for (const auto& [key, totals] : order) {
    if (static_cast<int>(out.size()) == n) break;
    SiteUsage site;
    for (std::int32_t f : *key)
      site.frames.push_back(snapshot_.frames[static_cast<std::size_t>(f)]);
    site.bytes = totals.bytes;
    site.count = totals.count;
    out.push_back(std::move(site));
  }
  return out;
}

}  // namespace memtune::snapshot
