// Blocks, the block arena and the ordered free-block sets of a BlockPool.
//
// PyTorch v2.x c10/cuda/CUDACachingAllocator.cpp: struct Block, BlockPool::blocks (ordered
// by BlockComparatorSize = (stream, size, ptr)) and BlockPool::unmapped (ordered by
// BlockComparatorAddress = (stream, ptr)). memtune keeps blocks in a flat arena addressed by
// BlockId and each ordered set as a FreeBlockSet (free_block_set.h). See note [flat free
// lists] in docs/design/allocator.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "memtune/alloc/constants.h"
#include "memtune/alloc/free_block_set.h"
#include "memtune/core/check.h"

namespace memtune::alloc {

// A block's life cycle: free (cached), allocated (handed out), or freed by the user but
// waiting for record_stream events ("active_pending_free" in snapshots).
enum class BlockState : std::uint8_t { kFree, kAllocated, kPendingFree };

// A contiguous address range inside one segment. Sizes are bytes.
struct Block {
  std::uint64_t ptr = 0;
  std::int64_t size = 0;
  std::int64_t requested_size = 0;  // orig of the last malloc served (stale when free)
  StreamId stream = 0;
  std::int64_t gc_count_base = 0;  // pool's get_free_blocks_call_count when inserted
  BlockId prev = kNoBlock;         // neighbours in the same segment, address order
  BlockId next = kNoBlock;
  std::int32_t expandable_segment = -1;  // index of its ExpandableSegment, -1 = cudaMalloc'd
  std::uint32_t owner = 0;               // handle that allocated it (valid while not free)
  FreeBlockSet::Slot free_slot = 0;      // its group in the pool's free set (valid while free)
  PoolKind pool = PoolKind::kLarge;
  BlockState state = BlockState::kFree;
  bool mapped = true;        // false only for unmapped expandable address space
  bool stream_used = false;  // record_stream on another stream since allocation
  bool live = false;         // arena slot in use

  bool is_split() const { return prev != kNoBlock || next != kNoBlock; }
  bool is_expandable() const { return expandable_segment >= 0; }
};

// Owns every Block; ids are reused after Delete. Not thread-safe.
class BlockArena {
 public:
  BlockId New() {
    BlockId id;
    if (!free_ids_.empty()) {
      id = free_ids_.back();
      free_ids_.pop_back();
    } else {
      id = static_cast<BlockId>(blocks_.size());
      blocks_.emplace_back();
    }
    blocks_[static_cast<std::size_t>(id)] = Block{};
    blocks_[static_cast<std::size_t>(id)].live = true;
    return id;
  }
  void Delete(BlockId id) {
    blocks_[static_cast<std::size_t>(id)].live = false;
    free_ids_.push_back(id);
  }
  Block& operator[](BlockId id) { return blocks_[static_cast<std::size_t>(id)]; }
  const Block& operator[](BlockId id) const { return blocks_[static_cast<std::size_t>(id)]; }
  // Number of slots (live or not); iterate ids 0..slots()-1 and test `live`.
  BlockId slots() const { return static_cast<BlockId>(blocks_.size()); }

 private:
  std::vector<Block> blocks_;
  std::vector<BlockId> free_ids_;
};

// Key of `b` in BlockPool::blocks (mapped) or BlockPool::unmapped.
inline FreeKey FreeKeyOf(const Block& b, BlockId id) {
  return FreeKey{b.stream, b.mapped ? b.size : 0, b.ptr, id};
}

}  // namespace memtune::alloc
