// SnapshotParser: the state of one ParseSnapshot call (the snapshot being filled and the
// frame/stack interning tables keyed by pickle value identity, so memo-shared frames are
// converted once).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "memtune/snapshot/snapshot.h"
#include "snapshot/id_cache.h"
#include "snapshot/snapshot_fields.h"

namespace memtune::snapshot {

class SnapshotParser {
 public:
  // `item_budget`: most segments, blocks and trace entries the conversion may produce.
  explicit SnapshotParser(std::int64_t item_budget)
      : items_left_(item_budget), item_budget_(item_budget) {}
  Result<Snapshot> Run(PickleValue root);

 private:
  // The keys of a trace entry that ParseSnapshot reads (snapshot_parse_traces.cc).
  enum class EntryKey : std::uint8_t {
    kAction,
    kAddr,
    kDeviceFree,
    kSize,
    kStream,
    kTimeUs,
    kFrames,
    kOther
  };

  Status Segments(PickleValue list, const Path& path);  // snapshot_parse_segments.cc
  Status OneSegment(PickleValue dict, const Path& path);
  Status CheckOverlaps(const Path& path) const;
  Status SegmentField(Segment& seg, std::string_view key, PickleValue v, const Path& path);
  Status Blocks(Segment& seg, PickleValue list, const Path& path);
  Result<Block> OneBlock(PickleValue dict, const Path& path, bool& has_address);
  Status Traces(PickleValue list, const Path& path);  // snapshot_parse_traces.cc
  Result<TraceEntry> OneEntry(PickleValue dict, const Path& path);
  Status Settings(PickleValue dict, const Path& path);
  // Which entry key / action a str value is; cached by value id.
  EntryKey EntryKeyOf(PickleValue key) {
    const EntryKey* hit = entry_keys_.Find(key.id());
    return hit != nullptr ? *hit : ClassifyEntryKey(key);
  }
  TraceAction ActionOf(PickleValue action) {
    const TraceAction* hit = actions_.Find(action.id());
    return hit != nullptr ? *hit : ClassifyAction(action);
  }
  EntryKey ClassifyEntryKey(PickleValue key);  // the cache misses; they fill it
  TraceAction ClassifyAction(PickleValue action);
  Result<StackId> Stack(PickleValue frames, const Path& path);  // snapshot_parse.cc
  Result<std::int32_t> FrameIndex(PickleValue frame, const Path& path);

  // Takes `count` items from the budget, before they are built; the error names the limit.
  Status Spend(std::size_t count, const Path& path);  // snapshot_parse.cc

  std::int64_t items_left_;
  std::int64_t item_budget_;
  Snapshot snapshot_;
  // Memo-shared keys, actions and frame lists are classified once per id (see id_cache.h).
  IdCache<EntryKey> entry_keys_;
  IdCache<TraceAction> actions_;
  IdCache<StackId> stack_cache_;  // in front of stack_by_node_
  std::unordered_map<std::uint32_t, StackId> stack_by_node_;
  std::unordered_map<std::uint32_t, std::int32_t> frame_by_node_;
  std::map<std::tuple<std::string, std::int64_t, std::string>, std::int32_t> frame_by_content_;
};

}  // namespace memtune::snapshot
