// IdArray: a growable array of pickle value ids (the reader's stack and memo) whose append
// is a compare, a store and an increment, so it inlines into the opcode loop (GCC does not
// inline std::vector::push_back into a function that large).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "memtune/core/check.h"

namespace memtune::snapshot {

// Ids in insertion order. Indexes must be < size() (checked only by the caller). Growth
// doubles the capacity, so appends are amortized O(1). Neither copyable nor movable; not
// thread-safe.
// Example:
//   IdArray stack;
//   stack.push_back(7);
//   stack.Truncate(0);  // drop everything, keep the capacity
class IdArray {
 public:
  IdArray() = default;
  IdArray(const IdArray&) = delete;
  IdArray& operator=(const IdArray&) = delete;

  // Room for at least `n` ids without growing.
  void reserve(std::size_t n) {
    if (n > capacity_) Regrow(n);
  }

  [[gnu::always_inline]] void push_back(std::uint32_t id) {
    if (size_ == capacity_) [[unlikely]]
      Regrow(capacity_ == 0 ? kMinCapacity : 2 * capacity_);
    ids_[size_++] = id;
  }
  void pop_back() { --size_; }  // precondition: !empty()
  // Keeps the first `n` ids; precondition: n <= size().
  void Truncate(std::size_t n) { size_ = n; }

  std::uint32_t& operator[](std::size_t i) { return ids_[i]; }
  std::uint32_t operator[](std::size_t i) const { return ids_[i]; }
  std::uint32_t back() const { return ids_[size_ - 1]; }  // precondition: !empty()
  const std::uint32_t* data() const { return ids_.get(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity() const { return capacity_; }

 private:
  static constexpr std::size_t kMinCapacity = 64;  // ids

  [[gnu::noinline]] void Regrow(std::size_t capacity) {
    MEMTUNE_CHECK(capacity > size_, "IdArray shrinks below its size");
    auto bigger = std::make_unique_for_overwrite<std::uint32_t[]>(capacity);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = ids_[i];
    ids_ = std::move(bigger);
    capacity_ = capacity;
  }

  std::unique_ptr<std::uint32_t[]> ids_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace memtune::snapshot
