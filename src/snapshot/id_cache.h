// IdCache: remembers what a pickle value was found to mean (which field a dict key names,
// which action a string is, which stack a frame list became), keyed by its value id.
//
// Python's pickler writes a repeated key or string once and refers back to it through the
// memo, so one id stands for the same value hundreds of thousands of times in a snapshot;
// a probe of this cache replaces the string compares or hash-map lookup per occurrence.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace memtune::snapshot {

// A direct-mapped cache of kSlots entries from value ids (PickleValue::id()) to V. A Put
// may evict an earlier id that maps to the same slot, so Find can miss for an id that was
// stored: callers always keep a way to recompute the value. Values of a PickleDocument are
// immutable, so an entry never goes stale while its document lives; use one cache per
// document. Not thread-safe.
// Example:
//   IdCache<Field> keys;
//   const Field* hit = keys.Find(key.id());
//   Field f = hit != nullptr ? *hit : Classify(key.AsStr());
//   if (hit == nullptr) keys.Put(key.id(), f);
template <typename V, std::size_t kSlots = 256>
class IdCache {
  static_assert(kSlots > 0 && (kSlots & (kSlots - 1)) == 0, "kSlots must be a power of two");

 public:
  // The value last stored for `id`, or nullptr when it was never stored or was evicted.
  // The pointer is valid until the next Put.
  const V* Find(std::uint32_t id) const {
    const Slot& slot = slots_[SlotOf(id)];
    return slot.key == Key(id) ? &slot.value : nullptr;
  }

  // Stores `value` for `id`, replacing whatever held its slot.
  void Put(std::uint32_t id, V value) { slots_[SlotOf(id)] = Slot{Key(id), value}; }

 private:
  struct Slot {
    std::uint64_t key = 0;  // id + 1; 0 = empty
    V value{};
  };
  static std::uint64_t Key(std::uint32_t id) { return std::uint64_t{id} + 1; }
  // Fibonacci hashing spreads ids that were allocated close together (keys written one
  // after the other) over different slots.
  static std::size_t SlotOf(std::uint32_t id) {
    return static_cast<std::size_t>((std::uint64_t{id} * 0x9E3779B97F4A7C15ULL) >> 40) &
           (kSlots - 1);
  }

  std::array<Slot, kSlots> slots_{};
};

}  // namespace memtune::snapshot
