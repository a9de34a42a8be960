// BuildStart: recreates a rebuilt starting state inside the simulator with synthetic
// allocations. Segments are created and then carved block by block in address order while
// every other cached block is allocated, so each allocation takes the low end of the only
// free block (best fit, allocator.md 3.2 and 3.12); gap fillers are freed at the end.
#include <algorithm>

#include "memtune/alloc/constants.h"
#include "snapshot/replay_internal.h"

namespace memtune::snapshot {
namespace {

constexpr std::int64_t kSmallMax = alloc::kSmallSize;  // bytes; largest small-pool request
// Mapped runs further apart than this are not one expandable segment (whose address range
// is 1.125 x the GPU's memory); they are rebuilt as separate segments.
constexpr std::int64_t kMaxHoleBytes = std::int64_t{1} << 40;  // bytes (1 TiB)

class Builder {
 public:
  Builder(alloc::Simulator& sim, HandleMap& handles, std::int64_t& next_address,
          std::int64_t budget)
      : sim_(sim), handles_(handles), next_address_(next_address), budget_(budget) {}

  void Segment(const StartSegment& seg, bool continues_run);
  void Hole(std::int64_t bytes, const StartSegment& next);
  std::vector<std::string> Finish();

 private:
  // Allocates `bytes` at the current carve position; small-pool pieces go in <= 1 MiB steps.
  void Carve(const StartSegment& seg, const StartPiece& piece, std::int64_t address);
  bool Temp(std::int64_t bytes, alloc::StreamId stream, std::vector<alloc::HandleId>& into);

  alloc::Simulator& sim_;
  HandleMap& handles_;
  std::int64_t& next_address_;
  bool Spend() { return budget_-- > 0; }

  std::int64_t budget_;  // synthetic allocations left
  std::vector<alloc::HandleId> gaps_, holes_;
  std::int64_t failures_ = 0;
};

bool Builder::Temp(std::int64_t bytes, alloc::StreamId stream, std::vector<alloc::HandleId>& into) {
  if (!Spend()) return false;
  const alloc::HandleId h = handles_.NewAnonymous();
  if (sim_.Alloc(h, bytes, stream).status != alloc::AllocStatus::kOk) {
    handles_.Recycle(h);
    ++failures_;
    return false;
  }
  into.push_back(h);
  return true;
}

void Builder::Carve(const StartSegment& seg, const StartPiece& piece, std::int64_t address) {
  const auto stream = static_cast<alloc::StreamId>(seg.stream);
  if (piece.live) {
    if (!Spend()) return;
    const alloc::HandleId h = handles_.Bind(address);
    // The block keeps the request PyTorch recorded for it, which its free will report.
    const bool known_request =
        piece.requested_bytes > 0 && piece.requested_bytes <= piece.size_bytes;
    const auto r = known_request
                       ? sim_.AllocRecorded(h, piece.size_bytes, piece.requested_bytes, stream)
                       : sim_.Alloc(h, piece.size_bytes, stream);
    if (r.status != alloc::AllocStatus::kOk || static_cast<std::int64_t>(r.address) != address ||
        r.block_size_bytes != piece.size_bytes) {
      ++failures_;
    }
    return;
  }
  std::int64_t left = piece.size_bytes;
  while (left > 0) {
    const std::int64_t step = seg.pool == PoolType::kSmall ? std::min(left, kSmallMax) : left;
    if (!Temp(step, stream, gaps_)) return;
    left -= step;
  }
}

void Builder::Segment(const StartSegment& seg, bool continues_run) {
  const auto stream = static_cast<alloc::StreamId>(seg.stream);
  if (!continues_run) next_address_ = seg.address;
  if (!seg.expandable && seg.pool == PoolType::kLarge) {
    // One allocation of the whole size creates exactly this segment; freeing it leaves one
    // free block to carve.
    std::vector<alloc::HandleId> whole;
    if (!Temp(seg.size_bytes, stream, whole)) return;
    sim_.Free(whole.back());
    handles_.Recycle(whole.back());
  }
  std::int64_t address = seg.address;
  for (const StartPiece& piece : seg.pieces) {
    Carve(seg, piece, address);
    address += piece.size_bytes;
  }
}

void Builder::Hole(std::int64_t bytes, const StartSegment& next) {
  std::int64_t left = bytes;
  while (left > 0) {
    const std::int64_t step = next.pool == PoolType::kSmall ? std::min(left, kSmallMax) : left;
    if (!Temp(step, static_cast<alloc::StreamId>(next.stream), holes_)) return;
    left -= step;
  }
}

std::vector<std::string> Builder::Finish() {
  for (alloc::HandleId h : holes_) {
    sim_.Free(h);
    handles_.Recycle(h);
  }
  if (!holes_.empty()) sim_.EmptyCache();  // unmaps the holes; every other block is in use
  for (alloc::HandleId h : gaps_) {
    sim_.Free(h);
    handles_.Recycle(h);
  }
  next_address_ = -1;
  std::vector<std::string> notes;
  if (budget_ < 0) {
    notes.push_back(
        "the starting state is too large to rebuild from this snapshot; it was rebuilt in part");
  }
  if (failures_ > 0) {
    notes.push_back("the rebuilt starting state could not be reproduced exactly (" +
                    std::to_string(failures_) + " block(s) differ); early events may diverge");
  }
  return notes;
}

}  // namespace

std::vector<std::string> BuildStart(alloc::Simulator& sim, const StartState& start,
                                    HandleMap& handles, std::int64_t& next_segment_address) {
  Builder builder(sim, handles, next_segment_address, start.work_budget);
  const StartSegment* prev = nullptr;
  for (const StartSegment& seg : start.segments) {
    // Mapped runs of one expandable segment (same pool and stream) share its address range;
    // the unmapped space between them is mapped by a filler and unmapped again at the end.
    const bool continues_run = prev != nullptr && prev->expandable && seg.expandable &&
                               prev->pool == seg.pool && prev->stream == seg.stream &&
                               seg.address - (prev->address + prev->size_bytes) <= kMaxHoleBytes;
    if (continues_run) builder.Hole(seg.address - (prev->address + prev->size_bytes), seg);
    builder.Segment(seg, continues_run);
    prev = &seg;
  }
  return builder.Finish();
}

}  // namespace memtune::snapshot
