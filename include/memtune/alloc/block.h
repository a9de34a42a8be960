// Blocks, the block arena and the ordered free-block sets of a BlockPool.
//
// PyTorch v2.x c10/cuda/CUDACachingAllocator.cpp: struct Block, BlockPool::blocks (ordered
// by BlockComparatorSize = (stream, size, ptr)) and BlockPool::unmapped (ordered by
// BlockComparatorAddress = (stream, ptr)). memtune keeps blocks in a flat arena addressed by
// BlockId and each ordered set as a chunked sorted vector: lookups are binary searches over
// contiguous memory and steady-state replay allocates nothing. See note [flat free lists]
// in docs/design/allocator.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "memtune/alloc/constants.h"
#include "memtune/core/check.h"

namespace memtune::alloc {

using BlockId = std::int32_t;
inline constexpr BlockId kNoBlock = -1;

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

// The sort key of a free block: (stream, size, ptr). For the unmapped set size is 0, so
// the order is (stream, ptr). Streams compare as unsigned integers, like uintptr_t. Stream and
// size are packed into one 128-bit integer so a comparison is two integer compares without
// branches (the binary searches are the simulator's hottest code).
struct FreeKey {
  unsigned __int128 major = 0;  // stream << 64 | size
  std::uint64_t ptr = 0;
  BlockId id = kNoBlock;

  FreeKey() = default;
  FreeKey(StreamId stream, std::int64_t size, std::uint64_t p, BlockId block)
      : major((static_cast<unsigned __int128>(stream) << 64) | static_cast<std::uint64_t>(size)),
        ptr(p),
        id(block) {}
  StreamId stream() const { return static_cast<StreamId>(major >> 64); }
  std::int64_t size() const { return static_cast<std::int64_t>(static_cast<std::uint64_t>(major)); }
  bool operator<(const FreeKey& o) const {
    return (major < o.major) | ((major == o.major) & (ptr < o.ptr));
  }
};

// An ordered set of free blocks: a sorted sequence split into small sorted chunks (at most
// kMaxChunk keys each), so a lookup is two short binary searches and an insert or erase
// moves at most one chunk. See note [flat free lists] in docs/design/allocator.md.
// Positions are invalidated by Insert; EraseAt/Erase leave positions before the erased key
// valid.
class FreeBlockSet {
 public:
  static constexpr std::size_t kMaxChunk = 32;  // keys per chunk before it splits

  // A position: chunk index and offset; chunk == number of chunks means "end".
  struct Pos {
    std::uint32_t chunk = 0;
    std::uint32_t offset = 0;
  };

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Pos Begin() const { return Pos{0, 0}; }
  bool IsEnd(Pos p) const { return p.chunk >= chunks_.size(); }
  bool IsBegin(Pos p) const { return p.chunk == 0 && p.offset == 0; }
  const FreeKey& At(Pos p) const { return chunks_[p.chunk][p.offset]; }
  Pos Next(Pos p) const {
    return p.offset + 1 < chunks_[p.chunk].size() ? Pos{p.chunk, p.offset + 1}
                                                  : Pos{p.chunk + 1, 0};
  }
  // The position before `p` (which may be End); `p` must not be Begin.
  Pos Prev(Pos p) const {
    if (p.offset > 0) return Pos{p.chunk, p.offset - 1};
    const std::uint32_t c = p.chunk - 1;
    return Pos{c, static_cast<std::uint32_t>(chunks_[c].size() - 1)};
  }

  // First key >= (stream, size, ptr 0), or End.
  Pos LowerBound(StreamId stream, std::int64_t size) const {
    return LowerBoundKey(FreeKey(stream, size, 0, kNoBlock));
  }
  void Insert(const FreeKey& key);
  void EraseAt(Pos p);
  // Replaces the key at `p` by `smaller`, which must sort before it (a split remainder);
  // cheaper than EraseAt + Insert when it stays in the same chunk.
  void ReplaceAt(Pos p, const FreeKey& smaller);
  // Erases the key equal to `key` (same stream, size, ptr); it must be present.
  void Erase(const FreeKey& key);
  bool Contains(const FreeKey& key) const;

  // Calls f(const FreeKey&) for every key in order. `f` must not modify the set.
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& chunk : chunks_) {
      for (const FreeKey& k : chunk) f(k);
    }
  }

 private:
  Pos LowerBoundKey(const FreeKey& probe) const;
  // Index of the first chunk whose last key is >= probe (chunks_.size() if none).
  std::size_t ChunkFor(const FreeKey& probe) const;

  void SyncBack(std::size_t c) { backs_[c] = chunks_[c].back(); }

  std::vector<std::vector<FreeKey>> chunks_;  // non-empty, sorted, ordered across chunks
  std::vector<FreeKey> backs_;                // backs_[c] == chunks_[c].back(), contiguous
  std::vector<std::vector<FreeKey>> spare_;   // emptied chunks kept for reuse (no allocation)
  std::size_t size_ = 0;
};

// Key of `b` in BlockPool::blocks (mapped) or BlockPool::unmapped.
inline FreeKey FreeKeyOf(const Block& b, BlockId id) {
  return FreeKey{b.stream, b.mapped ? b.size : 0, b.ptr, id};
}

}  // namespace memtune::alloc
