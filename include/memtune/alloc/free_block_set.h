// FreeBlockSet: the ordered free-block sets of a BlockPool.
//
// PyTorch v2.x c10/cuda/CUDACachingAllocator.cpp: BlockPool::blocks is a std::set<Block*>
// ordered by BlockComparatorSize = (stream, size, ptr) and BlockPool::unmapped one ordered by
// BlockComparatorAddress = (stream, ptr). memtune keeps the same order but groups the keys by
// exact (stream, size), because a training pool holds many blocks of few distinct sizes: a
// best-fit lookup searches the distinct sizes of one stream, and a block is erased through
// the group handle ("slot") Insert returned, without a search. See note [flat free lists] in
// docs/design/allocator.md.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memtune/alloc/constants.h"

namespace memtune::alloc {

using BlockId = std::int32_t;
inline constexpr BlockId kNoBlock = -1;

// The sort key of a free block: (stream, size, ptr). For the unmapped set size is 0, so
// the order is (stream, ptr). Streams compare as unsigned integers, like uintptr_t. `id`
// names the block and takes no part in the order.
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

// An ordered set of FreeKeys (no two with the same stream, size and ptr). Layout: streams in
// ascending order, each with its distinct sizes ascending ("groups"), each group with its
// blocks' addresses. Sizes are bytes >= 0. Not thread-safe.
// Positions are invalidated by Insert; EraseAt/Erase leave positions before the erased key
// valid. A slot (the group handle Insert returns) stays valid while its key is in the set.
// Steady-state use allocates nothing (emptied groups and streams are recycled).
// Cost: lookups are O(log streams + log sizes);
// adding or removing a stream moves the later ones, O(streams), except inside a batch erase.
class FreeBlockSet {
 public:
  using Slot = std::uint32_t;

  // A position: stream index, group index in that stream, and the key's rank in address
  // order within the group; stream == number of streams means "end".
  struct Pos {
    std::uint32_t stream = 0;
    std::uint32_t group = 0;
    std::uint32_t rank = 0;
  };

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Pos Begin() const { return Pos{}; }  // no stream or group is ever empty
  bool IsEnd(Pos p) const { return p.stream >= streams_.size(); }
  bool IsBegin(Pos p) const { return p.stream == 0 && p.group == 0 && p.rank == 0; }
  // The key at `p` (not End), and its parts.
  FreeKey At(Pos p) const { return FreeKey(StreamAt(p), SizeAt(p), MemberAt(p).ptr, IdAt(p)); }
  StreamId StreamAt(Pos p) const { return streams_[p.stream].stream; }
  std::int64_t SizeAt(Pos p) const { return streams_[p.stream].groups[p.group].size; }
  BlockId IdAt(Pos p) const { return MemberAt(p).id; }
  // The position after `p` (not End).
  Pos Next(Pos p) const {
    const std::vector<Group>& groups = streams_[p.stream].groups;
    if (p.rank + 1 < members_[groups[p.group].slot].size())
      return Pos{p.stream, p.group, p.rank + 1};
    if (p.group + 1 < groups.size()) return Pos{p.stream, p.group + 1, 0};
    return Pos{p.stream + 1, 0, 0};
  }
  // The position before `p` (which may be End); `p` must not be Begin.
  Pos Prev(Pos p) const;

  // First key >= (stream, size, ptr 0), or End.
  Pos LowerBound(StreamId stream, std::int64_t size) const {
    const std::uint32_t si = StreamLowerBound(stream);
    if (si == streams_.size() || streams_[si].stream != stream) return Pos{si, 0, 0};
    const std::vector<Group>& groups = streams_[si].groups;
    const auto g = static_cast<std::uint32_t>(SizeLowerBound(groups, size, 0, groups.size()));
    if (g == groups.size()) return Pos{si + 1, 0, 0};
    return Pos{si, g, 0};
  }
  // Inserts a key that is not present; returns its slot (for Erase).
  Slot Insert(StreamId stream, std::int64_t size, std::uint64_t ptr, BlockId id);
  Slot Insert(const FreeKey& key) { return Insert(key.stream(), key.size(), key.ptr, key.id); }
  void EraseAt(Pos p);
  // Replaces the key at `p` by `smaller`, which must sort before it (a split remainder);
  // returns the new key's slot.
  Slot ReplaceAt(Pos p, const FreeKey& smaller) {
    EraseAt(p);
    return Insert(smaller);
  }
  // Erases the key of block `id` at `ptr`, whose Insert returned `slot`; it must be present.
  void Erase(Slot slot, std::uint64_t ptr, BlockId id);
  // Replaces the key of block `old_id` at `old_ptr` (slot `slot`) by (the same stream, size,
  // ptr, id): Erase + Insert, but cheap when the old key is alone in its group (a split
  // remainder, a merged block). Returns the new key's slot.
  Slot Replace(Slot slot, std::uint64_t old_ptr, BlockId old_id, std::int64_t size,
               std::uint64_t ptr, BlockId id);
  // Erases the key equal to `key` (same stream, size, ptr and id); it must be present.
  void Erase(const FreeKey& key);
  bool Contains(const FreeKey& key) const;

  // A batch erase: between BeginBatchErase and EndBatchErase only Erase(slot, ptr, id) may
  // be called (no lookup, position or insert); a stream whose last key goes stays listed,
  // empty, until EndBatchErase drops all of them in one pass. Releasing the whole cache of a
  // pool with many streams is then O(keys + streams) instead of O(streams) per stream.
  void BeginBatchErase() { batch_erase_ = true; }
  void EndBatchErase();

  // Calls f(const FreeKey&) for every key in order. `f` must not modify the set.
  template <typename F>
  void ForEach(F&& f) const {
    for (const StreamGroups& s : streams_) {
      for (const Group& g : s.groups) {
        const Members& m = members_[g.slot];
        for (auto it = m.rbegin(); it != m.rend(); ++it)
          f(FreeKey(s.stream, g.size, it->ptr, it->id));
      }
    }
  }

 private:
  struct Member {
    std::uint64_t ptr;
    BlockId id;
  };
  using Members = std::vector<Member>;  // one group's blocks by DEScending address (min last)
  struct Group {
    std::int64_t size;  // bytes
    Slot slot;          // index in members_ / where_
  };
  struct StreamGroups {
    StreamId stream = 0;
    std::vector<Group> groups;  // distinct sizes, ascending; never empty while listed
  };
  struct Where {  // where a live slot's group is listed
    std::uint32_t stream;
    std::uint32_t group;
  };

  const Member& MemberAt(Pos p) const {
    const Members& m = members_[streams_[p.stream].groups[p.group].slot];
    return m[m.size() - 1 - p.rank];
  }
  std::uint32_t StreamLowerBound(StreamId stream) const {  // first stream >= `stream`
    const auto it =
        std::partition_point(streams_.begin(), streams_.end(),
                             [stream](const StreamGroups& s) { return s.stream < stream; });
    return static_cast<std::uint32_t>(it - streams_.begin());
  }
  // Index of the first of groups[lo, hi) whose size is >= size (hi if none). Branch-free
  // halving: a fixed trip count for a given range.
  static std::size_t SizeLowerBound(const std::vector<Group>& groups, std::int64_t size,
                                    std::size_t lo, std::size_t hi) {
    std::size_t n = hi - lo;
    if (n == 0) return lo;
    const Group* base = groups.data() + lo;
    while (n > 1) {
      const std::size_t half = n / 2;
      base = base[half - 1].size < size ? base + half : base;
      n -= half;
    }
    return static_cast<std::size_t>(base - groups.data()) + (base->size < size ? 1 : 0);
  }
  // SizeLowerBound over groups[0, k) for a size below groups[k].size (a split remainder) and
  // over groups[k + 1, end) for a size above it (a merged block): the new size is usually a
  // group or two away, so a short linear walk from k comes first, then the halving.
  static std::size_t SizeLowerBoundBelow(const std::vector<Group>& groups, std::int64_t size,
                                         std::size_t k) {
    for (int step = 0; step < kWalkSteps; ++step, --k) {
      if (k == 0 || groups[k - 1].size < size) return k;
    }
    return SizeLowerBound(groups, size, 0, k);
  }
  static std::size_t SizeLowerBoundAbove(const std::vector<Group>& groups, std::int64_t size,
                                         std::size_t k) {
    std::size_t j = k + 1;
    for (int step = 0; step < kWalkSteps; ++step, ++j) {
      if (j == groups.size() || groups[j].size >= size) return j;
    }
    return SizeLowerBound(groups, size, j, groups.size());
  }
  static constexpr int kWalkSteps = 4;
  // The slot of the group (stream, size), or kNoSlot.
  Slot FindSlot(StreamId stream, std::int64_t size) const;
  // The index of (ptr, id) in group `slot`, or its size() if absent.
  [[gnu::always_inline]] inline std::size_t MemberIndex(Slot slot, std::uint64_t ptr,
                                                        BlockId id) const;
  void EraseMember(Slot slot, std::size_t index);
  [[gnu::always_inline]] inline void InsertMember(Slot slot, std::uint64_t ptr, BlockId id);
  // Opens group `g` of stream `si` for `size` with one key; returns its slot.
  Slot NewGroup(std::uint32_t si, std::size_t g, std::int64_t size, std::uint64_t ptr, BlockId id);
  Slot JoinGroup(Slot slot, std::size_t target_group, std::uint64_t ptr, BlockId id);
  void AddStream(std::uint32_t index, StreamId stream);
  void RemoveGroup(Slot slot);
  void Renumber(std::uint32_t stream, std::size_t first_group);  // where_ after a shift

  static constexpr Slot kNoSlot = ~Slot{0};
  std::vector<StreamGroups> streams_;  // ascending stream
  std::vector<Members> members_;       // by slot; emptied ones are recycled
  std::vector<Where> where_;           // by slot
  std::vector<Slot> spare_slots_;
  std::vector<StreamGroups> spare_streams_;  // emptied stream entries, capacity kept
  std::size_t size_ = 0;
  bool batch_erase_ = false;  // emptied streams stay listed until EndBatchErase
};

}  // namespace memtune::alloc
