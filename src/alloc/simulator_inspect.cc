// Looking at the simulated allocator: the OOM report, the snapshot view, the invariants,
// and the public Simulator methods (thin forwards to Impl).
#include <algorithm>
#include <string>

#include "alloc/simulator_impl.h"

namespace memtune::alloc {

void Simulator::Impl::RecordOom(const AllocParams& p, std::int64_t orig) {
  // PyTorch malloc(): cudaMemGetInfo after the cache was released, then the oom trace entry.
  OomReport r;
  r.requested_bytes = orig;
  r.rounded_bytes = p.size;
  r.allocation_bytes = p.alloc_size;
  r.stream = p.stream;
  r.device = options_.device_index;
  r.device_total_bytes = options_.capacity_bytes;
  r.device_free_bytes = std::max<std::int64_t>(
      0, options_.capacity_bytes - options_.non_pytorch_bytes - total_allocated_memory_);
  Emit(AllocatorEventKind::kOom, static_cast<std::uint64_t>(r.device_free_bytes), p.size, p.stream,
       p.pool);
  ledger_.Apply({StatEventKind::kOom});
  const DeviceStats& s = ledger_.stats();
  r.allocated_bytes = All(s.allocated_bytes).current;
  r.reserved_bytes = All(s.reserved_bytes).current;
  if (FractionSet() && rules_.oom_template == OomTemplate::kV24)
    r.allowed_bytes = allowed_memory_maximum_;
  if (options_.nvml_available)
    r.process_bytes = total_allocated_memory_ + options_.non_pytorch_bytes;
  last_oom_ = r;
}

std::vector<SegmentInfo> Simulator::Impl::Segments() const {
  std::vector<SegmentInfo> out;
  for (BlockId id = 0; id < arena_.slots(); ++id) {
    const Block& head = arena_[id];
    if (!head.live || !head.mapped) continue;
    if (head.prev != kNoBlock && arena_[head.prev].mapped) continue;  // not the start of a run
    SegmentInfo seg;
    seg.address = head.ptr;
    seg.stream = head.stream;
    seg.pool = head.pool;
    seg.is_expandable = head.is_expandable();
    for (BlockId b = id; b != kNoBlock && arena_[b].mapped; b = arena_[b].next) {
      const Block& blk = arena_[b];
      seg.blocks.push_back(BlockInfo{blk.ptr, blk.size, blk.requested_size, blk.state});
      seg.total_size_bytes += blk.size;
    }
    out.push_back(std::move(seg));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return out;
}

namespace {

Error Broken(const std::string& what) {
  return Error{ErrorCode::kInternal, "allocator invariant", what, {}};
}

}  // namespace

Status Simulator::Impl::CheckBlocks() const {
  std::size_t free_mapped = 0, free_unmapped = 0;
  for (BlockId id = 0; id < arena_.slots(); ++id) {
    const Block& b = arena_[id];
    if (!b.live) continue;
    if (b.size <= 0) return Broken("block of non-positive size");
    if (b.next != kNoBlock) {
      const Block& n = arena_[b.next];
      if (!n.live || n.prev != id) return Broken("prev/next links disagree");
      if (b.ptr + static_cast<std::uint64_t>(b.size) != n.ptr)
        return Broken("neighbouring blocks overlap or leave a gap");
      if (b.state == BlockState::kFree && n.state == BlockState::kFree && b.mapped == n.mapped) {
        return Broken("two adjacent free blocks were not merged");
      }
    }
    if (b.state != BlockState::kFree) continue;
    const FreeBlockSet& set = b.mapped ? pool(b.pool).blocks : pool(b.pool).unmapped;
    if (!set.Contains(FreeKeyOf(b, id))) return Broken("free block missing from its pool set");
    ++(b.mapped ? free_mapped : free_unmapped);
    const bool native_large_split =
        !b.is_expandable() && b.pool == PoolKind::kLarge && b.is_split();
    if (native_large_split && !cfg().expandable_segments && b.size <= kSmallSize) {
      return Broken("a free block of a split large native segment is <= 1 MiB");
    }
  }
  const std::size_t in_sets = pools_[0].blocks.size() + pools_[1].blocks.size();
  const std::size_t in_unmapped = pools_[0].unmapped.size() + pools_[1].unmapped.size();
  if (in_sets != free_mapped || in_unmapped != free_unmapped)
    return Broken("pool sets hold blocks that are not free");
  return OkStatus();
}

Status Simulator::Impl::CheckCounters() const {
  std::int64_t reserved = 0, allocated = 0, active = 0, requested = 0, split_bytes = 0;
  std::int64_t split_count = 0, native_segments = 0;
  for (const SegmentInfo& seg : Segments()) {
    reserved += seg.total_size_bytes;
    if (!seg.is_expandable) ++native_segments;
    for (const BlockInfo& b : seg.blocks) {
      if (b.state == BlockState::kAllocated) allocated += b.size_bytes;
      if (b.state != BlockState::kFree) {
        active += b.size_bytes;
        requested += b.requested_bytes;
      } else if (!seg.is_expandable && seg.blocks.size() > 1) {
        split_bytes += b.size_bytes;
        ++split_count;
      }
    }
  }
  const DeviceStats& s = ledger_.stats();
  if (reserved != All(s.reserved_bytes).current || reserved != total_allocated_memory_) {
    return Broken("reserved_bytes " + std::to_string(All(s.reserved_bytes).current) +
                  " != sum of segment sizes " + std::to_string(reserved));
  }
  if (allocated != All(s.allocated_bytes).current)
    return Broken("allocated_bytes != sum of allocated blocks");
  if (active != All(s.active_bytes).current) return Broken("active_bytes != sum of active blocks");
  if (requested != All(s.requested_bytes).current)
    return Broken("requested_bytes != sum of requested sizes");
  if (split_bytes != All(s.inactive_split_bytes).current ||
      split_count != All(s.inactive_split).current) {
    return Broken("inactive_split counters disagree with the split segments");
  }
  if (native_segments != All(s.segment).current) return Broken("segment count disagrees");
  if (allocated > reserved) return Broken("allocated > reserved");
  return OkStatus();
}

Status Simulator::Impl::CheckInvariants() const {
  MEMTUNE_RETURN_IF_ERROR(CheckBlocks());
  return CheckCounters();
}

// --- Simulator: forwards ---

Simulator::Simulator(SimulatorOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

FreeStatus Simulator::FreeCompleted(HandleId handle) { return impl_->FreeCompleted(handle); }
FreeStatus Simulator::RecordStream(HandleId handle, StreamId stream) {
  return impl_->RecordStream(handle, stream);
}
void Simulator::EmptyCache() { impl_->ReleaseCachedBlocks(); }
void Simulator::SetMemoryFraction(double fraction) { impl_->SetMemoryFraction(fraction); }
void Simulator::SetCapacity(std::int64_t capacity_bytes) {
  impl_->options_.capacity_bytes = capacity_bytes;
}
void Simulator::SetNonPytorchBytes(std::int64_t bytes) {
  impl_->options_.non_pytorch_bytes = bytes;
}
void Simulator::ResetPeakStats() { impl_->ledger_.ResetPeaks(); }
const DeviceStats& Simulator::stats() const { return impl_->ledger_.stats(); }
const SimulatorOptions& Simulator::options() const { return impl_->options_; }
const std::optional<OomReport>& Simulator::last_oom() const { return impl_->last_oom_; }
std::string Simulator::LastOomMessage() const {
  if (!impl_->last_oom_) return "";
  return FormatOomMessage(*impl_->last_oom_, impl_->options_.config.torch_version);
}
std::int64_t Simulator::DeviceFreeBytes() const {
  const auto& o = impl_->options_;
  return std::max<std::int64_t>(
      0, o.capacity_bytes - o.non_pytorch_bytes - impl_->total_allocated_memory_);
}
void Simulator::SetObserver(AllocatorObserver observer) { impl_->observer_ = std::move(observer); }
void Simulator::SetAddressOracle(AddressOracle oracle) { impl_->oracle_ = std::move(oracle); }
std::vector<SegmentInfo> Simulator::Segments() const { return impl_->Segments(); }
Status Simulator::CheckInvariants() const { return impl_->CheckInvariants(); }

std::optional<BlockInfo> Simulator::Lookup(HandleId handle) const {
  if (handle >= impl_->handles_.size()) return std::nullopt;
  const BlockId id = impl_->handles_[handle];
  if (id == kNullAllocation) return BlockInfo{0, 0, 0, BlockState::kAllocated};
  if (id < 0) return std::nullopt;
  const Block& b = impl_->arena_[id];
  return BlockInfo{b.ptr, b.size, b.requested_size, b.state};
}

}  // namespace memtune::alloc
