// FreeBlockSet: the chunked sorted sequence behind BlockPool::blocks / ::unmapped.
#include <algorithm>

#include "memtune/alloc/block.h"

namespace memtune::alloc {
namespace {

// Index of the first element of [data, data + n) that is not < probe. The halving compares
// only the packed (stream, size) word, branch-free (fixed trip count for a given n); the few
// keys equal in (stream, size) are then stepped over by address.
std::size_t LowerBoundIndex(const FreeKey* data, std::size_t n, const FreeKey& probe) {
  const FreeKey* base = data;
  const std::size_t total = n;
  while (n > 1) {
    const std::size_t half = n / 2;
    base = (base[half - 1].major < probe.major) ? base + half : base;
    n -= half;
  }
  std::size_t i =
      static_cast<std::size_t>(base - data) + (n == 1 && base->major < probe.major ? 1 : 0);
  while (i < total && data[i].major == probe.major && data[i].ptr < probe.ptr) ++i;
  return i;
}

}  // namespace

std::size_t FreeBlockSet::ChunkFor(const FreeKey& probe) const {
  return LowerBoundIndex(backs_.data(), backs_.size(), probe);
}

FreeBlockSet::Pos FreeBlockSet::LowerBoundKey(const FreeKey& probe) const {
  const std::size_t c = ChunkFor(probe);
  if (c == chunks_.size()) return Pos{static_cast<std::uint32_t>(c), 0};
  const auto& chunk = chunks_[c];
  return Pos{static_cast<std::uint32_t>(c),
             static_cast<std::uint32_t>(LowerBoundIndex(chunk.data(), chunk.size(), probe))};
}

void FreeBlockSet::Insert(const FreeKey& key) {
  ++size_;
  if (chunks_.empty()) {
    chunks_.emplace_back();
    if (!spare_.empty()) {
      chunks_.back().swap(spare_.back());
      spare_.pop_back();
    }
    chunks_.back().push_back(key);
    backs_.push_back(key);
    return;
  }
  std::size_t c = ChunkFor(key);
  if (c == chunks_.size()) --c;  // larger than every key: append to the last chunk
  auto& chunk = chunks_[c];
  chunk.insert(
      chunk.begin() + static_cast<std::ptrdiff_t>(LowerBoundIndex(chunk.data(), chunk.size(), key)),
      key);
  if (chunk.size() <= kMaxChunk) {
    SyncBack(c);
    return;
  }
  // Split the full chunk in two halves.
  std::vector<FreeKey> upper;
  if (!spare_.empty()) {
    upper.swap(spare_.back());
    spare_.pop_back();
  }
  const auto half = chunk.begin() + static_cast<std::ptrdiff_t>(chunk.size() / 2);
  upper.assign(half, chunk.end());
  chunk.erase(half, chunk.end());
  chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(c) + 1, std::move(upper));
  backs_.insert(backs_.begin() + static_cast<std::ptrdiff_t>(c) + 1, FreeKey());
  SyncBack(c);
  SyncBack(c + 1);
}

void FreeBlockSet::EraseAt(Pos p) {
  auto& chunk = chunks_[p.chunk];
  chunk.erase(chunk.begin() + p.offset);
  --size_;
  if (!chunk.empty()) {
    SyncBack(p.chunk);
    return;
  }
  spare_.push_back(std::move(chunk));
  spare_.back().clear();
  chunks_.erase(chunks_.begin() + p.chunk);
  backs_.erase(backs_.begin() + p.chunk);
}

void FreeBlockSet::ReplaceAt(Pos p, const FreeKey& smaller) {
  auto& chunk = chunks_[p.chunk];
  if (p.chunk > 0 && !(backs_[p.chunk - 1] < smaller)) {  // belongs to an earlier chunk
    EraseAt(p);
    Insert(smaller);
    return;
  }
  const std::size_t j = LowerBoundIndex(chunk.data(), p.offset, smaller);
  std::move_backward(chunk.begin() + static_cast<std::ptrdiff_t>(j), chunk.begin() + p.offset,
                     chunk.begin() + p.offset + 1);
  chunk[j] = smaller;
  SyncBack(p.chunk);
}

void FreeBlockSet::Erase(const FreeKey& key) {
  const Pos p = LowerBoundKey(key);
  MEMTUNE_CHECK(!IsEnd(p) && At(p).id == key.id, "free block missing from its pool set");
  EraseAt(p);
}

bool FreeBlockSet::Contains(const FreeKey& key) const {
  const Pos p = LowerBoundKey(key);
  return !IsEnd(p) && At(p).id == key.id;
}

}  // namespace memtune::alloc
