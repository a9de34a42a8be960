// FreeBlockSet: the grouped free lists behind BlockPool::blocks / ::unmapped (see
// free_block_set.h and note [flat free lists] in docs/design/allocator.md).
#include "memtune/alloc/free_block_set.h"

#include <utility>

#include "memtune/core/check.h"

namespace memtune::alloc {
namespace {

// Index of the first member of a group (descending addresses) whose address is <= ptr
// (m.size() if none). Branch-free halving, like SizeLowerBound.
template <typename Members>
std::size_t FirstAtOrBelow(const Members& m, std::uint64_t ptr) {
  std::size_t n = m.size();
  if (n == 0) return 0;
  const auto* base = m.data();
  while (n > 1) {
    const std::size_t half = n / 2;
    base = base[half - 1].ptr > ptr ? base + half : base;
    n -= half;
  }
  return static_cast<std::size_t>(base - m.data()) + (base->ptr > ptr ? 1 : 0);
}

}  // namespace

FreeBlockSet::Pos FreeBlockSet::Prev(Pos p) const {
  if (p.rank > 0) return Pos{p.stream, p.group, p.rank - 1};
  if (p.group == 0) {  // last group of the previous stream
    p.stream -= 1;
    p.group = static_cast<std::uint32_t>(streams_[p.stream].groups.size());
  }
  p.group -= 1;
  const std::size_t n = members_[streams_[p.stream].groups[p.group].slot].size();
  return Pos{p.stream, p.group, static_cast<std::uint32_t>(n - 1)};
}

FreeBlockSet::Slot FreeBlockSet::FindSlot(StreamId stream, std::int64_t size) const {
  const std::uint32_t si = StreamLowerBound(stream);
  if (si == streams_.size() || streams_[si].stream != stream) return kNoSlot;
  const std::vector<Group>& groups = streams_[si].groups;
  const std::size_t g = SizeLowerBound(groups, size, 0, groups.size());
  return g < groups.size() && groups[g].size == size ? groups[g].slot : kNoSlot;
}

std::size_t FreeBlockSet::MemberIndex(Slot slot, std::uint64_t ptr, BlockId id) const {
  const Members& m = members_[slot];
  const std::size_t last = m.size() - 1;  // the lowest address: best fit's usual pick
  const std::size_t i = m[last].ptr == ptr ? last : FirstAtOrBelow(m, ptr);
  return i < m.size() && m[i].ptr == ptr && m[i].id == id ? i : m.size();
}

void FreeBlockSet::Renumber(std::uint32_t stream, std::size_t first_group) {
  const std::vector<Group>& groups = streams_[stream].groups;
  for (std::size_t g = first_group; g < groups.size(); ++g) {
    where_[groups[g].slot] = Where{stream, static_cast<std::uint32_t>(g)};
  }
}

FreeBlockSet::Slot FreeBlockSet::Insert(StreamId stream, std::int64_t size, std::uint64_t ptr,
                                        BlockId id) {
  MEMTUNE_CHECK(!batch_erase_, "insert into a free-block set inside a batch erase");
  ++size_;
  const std::uint32_t si = StreamLowerBound(stream);
  if (si == streams_.size() || streams_[si].stream != stream) AddStream(si, stream);
  std::vector<Group>& groups = streams_[si].groups;
  const std::size_t g = SizeLowerBound(groups, size, 0, groups.size());
  if (g < groups.size() && groups[g].size == size) {
    InsertMember(groups[g].slot, ptr, id);
    return groups[g].slot;
  }
  return NewGroup(si, g, size, ptr, id);
}

FreeBlockSet::Slot FreeBlockSet::NewGroup(std::uint32_t si, std::size_t g, std::int64_t size,
                                          std::uint64_t ptr, BlockId id) {
  std::vector<Group>& groups = streams_[si].groups;
  Slot slot;
  if (!spare_slots_.empty()) {
    slot = spare_slots_.back();
    spare_slots_.pop_back();
  } else {
    slot = static_cast<Slot>(members_.size());
    members_.emplace_back();
    where_.emplace_back();
  }
  members_[slot].push_back(Member{ptr, id});
  // Open a hole at g, renumbering the groups that move (a short loop beats a memmove call).
  groups.emplace_back();
  for (std::size_t j = groups.size() - 1; j > g; --j) {
    groups[j] = groups[j - 1];
    where_[groups[j].slot].group = static_cast<std::uint32_t>(j);
  }
  groups[g] = Group{size, slot};
  where_[slot] = Where{si, static_cast<std::uint32_t>(g)};
  return slot;
}

void FreeBlockSet::InsertMember(Slot slot, std::uint64_t ptr, BlockId id) {
  Members& m = members_[slot];
  if (ptr < m.back().ptr) {
    m.push_back(Member{ptr, id});  // the new lowest address
  } else {
    m.insert(m.begin() + static_cast<std::ptrdiff_t>(FirstAtOrBelow(m, ptr)), Member{ptr, id});
  }
}

FreeBlockSet::Slot FreeBlockSet::Replace(Slot slot, std::uint64_t old_ptr, BlockId old_id,
                                         std::int64_t size, std::uint64_t ptr, BlockId id) {
  Members& m = members_[slot];
  const Where w = where_[slot];
  std::vector<Group>& groups = streams_[w.stream].groups;
  std::size_t k = w.group;
  if (m.size() != 1) {  // the group stays: erase the old key, insert the new one nearby
    const std::size_t i = MemberIndex(slot, old_ptr, old_id);
    MEMTUNE_CHECK(i < m.size(), "free block missing from its pool set");
    m.erase(m.begin() + static_cast<std::ptrdiff_t>(i));
    const std::int64_t old_size = groups[k].size;
    if (size == old_size) {
      InsertMember(slot, ptr, id);
      return slot;
    }
    const std::size_t at = size < old_size ? SizeLowerBoundBelow(groups, size, k)
                                           : SizeLowerBoundAbove(groups, size, k);
    if (at < groups.size() && groups[at].size == size) {
      InsertMember(groups[at].slot, ptr, id);
      return groups[at].slot;
    }
    return NewGroup(w.stream, at, size, ptr, id);
  }
  MEMTUNE_CHECK(m[0].ptr == old_ptr && m[0].id == old_id, "free block missing from its pool set");
  // The old key is its group's only member: move the group to the new size's place,
  // shifting only the groups in between, or join the group of that size.
  if (size < groups[k].size) {
    const std::size_t at = SizeLowerBoundBelow(groups, size, k);
    if (groups[at].size == size) return JoinGroup(slot, at, ptr, id);
    for (; k > at; --k) {
      groups[k] = groups[k - 1];
      where_[groups[k].slot].group = static_cast<std::uint32_t>(k);
    }
  } else if (size > groups[k].size) {
    const std::size_t at = SizeLowerBoundAbove(groups, size, k);
    if (at < groups.size() && groups[at].size == size) return JoinGroup(slot, at, ptr, id);
    for (; k + 1 < at; ++k) {
      groups[k] = groups[k + 1];
      where_[groups[k].slot].group = static_cast<std::uint32_t>(k);
    }
  }
  groups[k] = Group{size, slot};
  where_[slot].group = static_cast<std::uint32_t>(k);
  m[0] = Member{ptr, id};
  return slot;
}

FreeBlockSet::Slot FreeBlockSet::JoinGroup(Slot slot, std::size_t target_group, std::uint64_t ptr,
                                           BlockId id) {
  const Slot target = streams_[where_[slot].stream].groups[target_group].slot;
  InsertMember(target, ptr, id);
  members_[slot].clear();
  RemoveGroup(slot);  // the set's stream keeps the target group, so it is not removed
  return target;
}

void FreeBlockSet::AddStream(std::uint32_t si, StreamId stream) {
  StreamGroups fresh;
  if (!spare_streams_.empty()) {
    fresh = std::move(spare_streams_.back());
    spare_streams_.pop_back();
  }
  fresh.stream = stream;
  streams_.insert(streams_.begin() + si, std::move(fresh));
  for (std::uint32_t later = si + 1; later < streams_.size(); ++later) Renumber(later, 0);
}

void FreeBlockSet::RemoveGroup(Slot slot) {
  const Where w = where_[slot];
  spare_slots_.push_back(slot);  // its Members keep their capacity: no allocation when reused
  std::vector<Group>& groups = streams_[w.stream].groups;
  const std::size_t n = groups.size() - 1;
  for (std::size_t j = w.group; j < n; ++j) {
    groups[j] = groups[j + 1];
    where_[groups[j].slot].group = static_cast<std::uint32_t>(j);
  }
  groups.pop_back();
  if (n > 0) return;
  if (batch_erase_) return;  // dropped by EndBatchErase
  spare_streams_.push_back(std::move(streams_[w.stream]));
  streams_.erase(streams_.begin() + w.stream);
  for (std::uint32_t later = w.stream; later < streams_.size(); ++later) Renumber(later, 0);
}

void FreeBlockSet::EndBatchErase() {
  batch_erase_ = false;
  std::uint32_t kept = 0;
  for (std::uint32_t i = 0; i < streams_.size(); ++i) {
    if (streams_[i].groups.empty()) {
      spare_streams_.push_back(std::move(streams_[i]));
      continue;
    }
    if (kept != i) {
      std::swap(streams_[kept], streams_[i]);  // streams_[i] is now a moved-from spare shell
      Renumber(kept, 0);
    }
    ++kept;
  }
  streams_.resize(kept);
}

void FreeBlockSet::EraseMember(Slot slot, std::size_t index) {
  --size_;
  Members& m = members_[slot];
  if (m.size() > 1) {
    m.erase(m.begin() + static_cast<std::ptrdiff_t>(index));
    return;
  }
  m.clear();
  RemoveGroup(slot);
}

void FreeBlockSet::EraseAt(Pos p) {
  const Slot slot = streams_[p.stream].groups[p.group].slot;
  EraseMember(slot, members_[slot].size() - 1 - p.rank);
}

void FreeBlockSet::Erase(Slot slot, std::uint64_t ptr, BlockId id) {
  const std::size_t i = MemberIndex(slot, ptr, id);
  MEMTUNE_CHECK(i < members_[slot].size(), "free block missing from its pool set");
  EraseMember(slot, i);
}

void FreeBlockSet::Erase(const FreeKey& key) {
  const Slot slot = FindSlot(key.stream(), key.size());
  MEMTUNE_CHECK(slot != kNoSlot, "free block missing from its pool set");
  Erase(slot, key.ptr, key.id);
}

bool FreeBlockSet::Contains(const FreeKey& key) const {
  const Slot slot = FindSlot(key.stream(), key.size());
  return slot != kNoSlot && MemberIndex(slot, key.ptr, key.id) < members_[slot].size();
}

}  // namespace memtune::alloc
