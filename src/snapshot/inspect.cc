// Inspect, part 1: the final allocator state of each device (allocator.md 5.3 invariants
// give the meaning of every counter).
#include "memtune/snapshot/inspect.h"

#include <algorithm>
#include <map>

#include "snapshot/inspect_internal.h"

namespace memtune::snapshot {
namespace {

constexpr int kMaxFramesDepth = 64;
constexpr int kMaxTopSites = 1000;

PoolSegments& PoolOf(DeviceInspect& dev, const Segment& seg) {
  for (PoolSegments& p : dev.pools) {
    if (p.pool == seg.segment_type && p.expandable == seg.is_expandable &&
        p.pool_id == seg.pool_id) {
      return p;
    }
  }
  PoolSegments p;
  p.pool = seg.segment_type;
  p.expandable = seg.is_expandable;
  p.pool_id = seg.pool_id;
  dev.pools.push_back(p);
  return dev.pools.back();
}

void AddSegment(DeviceInspect& dev, const Segment& seg, SiteTable& sites) {
  PoolSegments& pool = PoolOf(dev, seg);
  ++dev.segments;
  ++pool.segments;
  dev.reserved_bytes += seg.total_size_bytes;
  pool.reserved_bytes += seg.total_size_bytes;
  const bool split = seg.blocks.size() > 1;
  for (const Block& b : seg.blocks) {
    switch (b.state) {
      case BlockState::kActiveAllocated:
        dev.allocated_bytes += b.size_bytes;
        pool.allocated_bytes += b.size_bytes;
        dev.active_bytes += b.size_bytes;
        dev.requested_bytes += b.requested_bytes;
        ++dev.live_allocations;
        sites.Add(b.stack, b.size_bytes);
        break;
      case BlockState::kActivePendingFree:
        dev.active_bytes += b.size_bytes;
        dev.requested_bytes += b.requested_bytes;
        break;
      case BlockState::kInactive:
        dev.free_bytes += b.size_bytes;
        dev.largest_free_block_bytes = std::max(dev.largest_free_block_bytes, b.size_bytes);
        pool.largest_free_block_bytes = std::max(pool.largest_free_block_bytes, b.size_bytes);
        // PyTorch counts inactive_split only for native blocks (allocator.md 4.7).
        if (split && !seg.is_expandable) {
          dev.inactive_split_bytes += b.size_bytes;
          ++dev.inactive_split_blocks;
        }
        break;
    }
  }
}

bool PoolOrder(const PoolSegments& a, const PoolSegments& b) {
  return std::tie(a.pool_id, a.pool, a.expandable) < std::tie(b.pool_id, b.pool, b.expandable);
}

}  // namespace

std::string FormatFrame(const Frame& frame) {
  const std::size_t slash = frame.filename.find_last_of('/');
  const std::string file =
      slash == std::string::npos ? frame.filename : frame.filename.substr(slash + 1);
  std::string text = file + ":" + std::to_string(frame.line) + ":" + frame.name;
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';  // no terminal controls
  }
  return text;
}

Result<InspectReport> Inspect(const Snapshot& snapshot, const InspectOptions& options) {
  if (options.frames_depth < 1 || options.frames_depth > kMaxFramesDepth) {
    return InvalidConfig(
        "--frames", std::to_string(options.frames_depth) + " is out of range; allowed: 1 to 64");
  }
  if (options.top_sites < 1 || options.top_sites > kMaxTopSites) {
    return InvalidConfig(
        "--top", std::to_string(options.top_sites) + " is out of range; allowed: 1 to 1000");
  }
  InspectReport report;
  report.format = snapshot.format;
  report.settings = snapshot.settings;
  report.options = options;
  const int devices = std::max(snapshot.device_count(), 1);
  for (int d = 0; d < devices; ++d) {
    DeviceInspect dev;
    dev.device = d;
    SiteTable sites(snapshot, options.frames_depth);
    for (const Segment& seg : snapshot.segments) {
      if (seg.device == d) AddSegment(dev, seg, sites);
    }
    std::sort(dev.pools.begin(), dev.pools.end(), PoolOrder);
    dev.reserved_unallocated_bytes = dev.reserved_bytes - dev.allocated_bytes;
    if (dev.reserved_unallocated_bytes > 0) {
      dev.fragmentation = 1.0 - static_cast<double>(dev.largest_free_block_bytes) /
                                    static_cast<double>(dev.reserved_unallocated_bytes);
    }
    dev.top_sites = sites.Top(options.top_sites);
    if (static_cast<std::size_t>(d) < snapshot.device_traces.size()) {
      MEMTUNE_RETURN_IF_ERROR(SummarizeTrace(snapshot, d, options, dev));
    } else {
      dev.trace.peak_reserved_bytes = dev.reserved_bytes;
      dev.trace.peak_requested_bytes = dev.requested_bytes;
    }
    report.devices.push_back(std::move(dev));
  }
  return report;
}

}  // namespace memtune::snapshot
