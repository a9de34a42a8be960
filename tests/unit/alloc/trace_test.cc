// The trace format reader and ReplayTrace: parsing, labels, errors with line numbers,
// streaming handle reuse, and what happens after an OOM.
#include "memtune/alloc/trace.h"

#include <gtest/gtest.h>

#include <sstream>

#include "memtune/alloc/replay.h"

namespace memtune::alloc {
namespace {

std::vector<TraceEvent> ReadAll(const std::string& text, std::string* error = nullptr) {
  std::istringstream in(text);
  TraceReader reader(in, "t.trace");
  std::vector<TraceEvent> out;
  TraceEvent ev;
  while (true) {
    auto more = reader.Next(ev);
    if (!more) {
      if (error)
        *error =
            more.error().Describe() + (more.error().hint.empty() ? "" : " | " + more.error().hint);
      break;
    }
    if (!*more) break;
    out.push_back(ev);
  }
  return out;
}

std::string ErrorOf(const std::string& text) {
  std::string e;
  ReadAll(text, &e);
  return e;
}

TEST(TraceReaderTest, ParsesOpsUnitsStreamsAndLabels) {
  std::string err;
  std::istringstream in(
      "# a comment\n"
      "\n"
      "alloc a 20MiB   # layer 0 activation\n"
      "alloc b 4096 0x10\n"
      "record_stream b 3\n"
      "free a\n"
      "empty_cache\n"
      "set_capacity 80GiB\n"
      "set_non_pytorch 1.5GiB\n"
      "set_memory_fraction 0.5\n"
      "reset_peak_stats\n");
  TraceReader reader(in, "t.trace");
  TraceEvent ev;
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.op, TraceOp::kAlloc);
  EXPECT_EQ(ev.line, 3);
  EXPECT_EQ(ev.handle_name, "a");
  EXPECT_EQ(ev.bytes, 20 * kMiB);
  EXPECT_EQ(ev.label, "layer 0 activation");
  const HandleId a = ev.handle;
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.stream, 16u);
  EXPECT_EQ(ev.bytes, 4096);
  EXPECT_NE(ev.handle, a);
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.op, TraceOp::kRecordStream);
  EXPECT_EQ(ev.stream, 3u);
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.op, TraceOp::kFree);
  EXPECT_EQ(ev.handle, a);
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.op, TraceOp::kEmptyCache);
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.bytes, 80 * kGiB);
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.bytes, 3 * kGiB / 2);
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_DOUBLE_EQ(ev.fraction, 0.5);
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.op, TraceOp::kResetPeakStats);
  EXPECT_FALSE(*reader.Next(ev));
}

TEST(TraceReaderTest, MalformedLinesNameTheLine) {
  EXPECT_EQ(ErrorOf("alloc a 10\naloc b 10\n"),
            "t.trace:2: unknown trace operation 'aloc'; allowed: alloc, free, free_completed, "
            "record_stream, empty_cache, set_capacity, set_non_pytorch, set_memory_fraction, "
            "reset_peak_stats | did you mean 'alloc'?");
  EXPECT_EQ(ErrorOf("alloc a\n"), "t.trace:1: 'alloc' takes 2 or 3 field(s), got 1");
  EXPECT_EQ(ErrorOf("free a b\n"), "t.trace:1: 'free' takes 1 field(s), got 2");
  EXPECT_EQ(ErrorOf("alloc a 12XB\n"),
            "t.trace:1: bad size '12XB': unknown unit 'xb' in '12XB'; allowed: B, KiB, MiB, GiB, "
            "TiB, kB, MB, GB, TB");
  EXPECT_EQ(ErrorOf("alloc a -5\n"),
            "t.trace:1: bad size '-5': '-5' is not a size; expected a number with an optional unit "
            "(B, KiB, "
            "MiB, GiB, TiB, kB, MB, GB, TB)");
  EXPECT_EQ(ErrorOf("alloc a 9999999999999999999\n"),
            "t.trace:1: size '9999999999999999999' is absurd (over 2^62 bytes)");
  EXPECT_EQ(ErrorOf("alloc a 4611686018427387905\n"),
            "t.trace:1: size '4611686018427387905' is absurd (over 2^62 bytes)");
  EXPECT_EQ(ErrorOf("alloc a 10 x\n"),
            "t.trace:1: bad stream 'x'; expected a non-negative integer (decimal or 0x hex)");
  EXPECT_EQ(ErrorOf("set_memory_fraction 1.5\n"),
            "t.trace:1: bad memory fraction '1.5'; expected a number in [0, 1]");
}

TEST(TraceReaderTest, HostileInputIsRefusedNotMisread) {
  // A stream beyond 2^64 was clamped to 2^64 - 1 by strtoull and accepted.
  EXPECT_EQ(ErrorOf("alloc a 10 18446744073709551616\n"),
            "t.trace:1: bad stream '18446744073709551616'; expected a non-negative integer "
            "(decimal or 0x hex)");
  // A capacity above the simulator's address model made expandable replays report OOMs.
  EXPECT_EQ(ErrorOf("set_capacity 2048TiB\n"),
            "t.trace:1: capacity '2048TiB' is above 1024 TiB, the largest device memory "
            "memtune simulates");
  EXPECT_EQ(ErrorOf("set_capacity 1024TiB\nset_non_pytorch 2048TiB\n"), "");
  // A line without end (/dev/zero, a binary file) grew without limit.
  EXPECT_EQ(ErrorOf("alloc a 1\n" + std::string(2 << 20, '\0')),
            "t.trace:2: the line is longer than 1,048,576 characters | allowed: one event per "
            "line (docs/trace-format.md); is this a trace file?");
  // The longest line allowed, and a last line without a newline, still read.
  std::string err;
  const auto events =
      ReadAll("alloc a 1 #" + std::string((1 << 20) - 11, 'x') + "\nfree a", &err);
  EXPECT_EQ(err, "");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].label.size(), static_cast<std::size_t>((1 << 20) - 11));
  EXPECT_EQ(events[1].op, TraceOp::kFree);
  EXPECT_EQ(events[1].line, 2);
}

TEST(TraceReaderTest, ReleasedHandlesAreReusedAndRemembered) {
  std::istringstream in("alloc a 1\nalloc b 1\nalloc c 1\n");
  TraceReader reader(in, "t");
  TraceEvent ev;
  ASSERT_TRUE(*reader.Next(ev));
  const HandleId a = ev.handle;
  reader.Release(a);
  EXPECT_TRUE(reader.RecentlyReleased("a"));
  ASSERT_TRUE(*reader.Next(ev));
  EXPECT_EQ(ev.handle, a);  // "b" reuses a's id
  EXPECT_EQ(reader.live_handles(), 1u);
}

SimulatorOptions Options(std::string_view conf, std::int64_t capacity) {
  SimulatorOptions o;
  o.config = *ParseAllocatorConfig(conf, kDefaultTorchVersion);
  o.capacity_bytes = capacity;
  return o;
}

Result<std::vector<ReplaySummary>> Replay(const std::string& text,
                                          std::vector<SimulatorOptions> sims) {
  std::istringstream in(text);
  ReplayOptions options;
  options.simulators = std::move(sims);
  return ReplayTrace(in, "t.trace", options);
}

TEST(ReplayTest, Section49Example1BothModes) {
  const std::string trace = "alloc a 100MiB\nfree a\nalloc b 60MiB\nalloc c 100MiB\n";
  auto r = Replay(trace, {Options("", 80 * kGiB), Options("expandable_segments:True", 80 * kGiB)});
  ASSERT_TRUE(r.has_value()) << r.error().Describe();
  EXPECT_EQ((*r)[0].peak_reserved_bytes, 200 * kMiB);
  EXPECT_EQ((*r)[1].peak_reserved_bytes, 160 * kMiB);
  EXPECT_EQ((*r)[0].peak_allocated_bytes, 160 * kMiB);
  EXPECT_EQ((*r)[0].reserved_unallocated_at_peak_bytes, 40 * kMiB);
  EXPECT_EQ((*r)[0].peak_reserved_event_index, 3);
  EXPECT_EQ((*r)[0].events, 4);
  EXPECT_FALSE((*r)[0].first_oom.has_value());
}

TEST(ReplayTest, AfterAnOomTheTraceContinues) {
  const std::string trace =
      "alloc a 60MiB\n"
      "alloc big 80MiB  # the step that does not fit\n"
      "free big\n"
      "free a\n"
      "alloc c 90MiB\n";
  auto r = Replay(trace, {Options("", 100 * kMiB)});
  ASSERT_TRUE(r.has_value()) << r.error().Describe();
  const ReplaySummary& s = (*r)[0];
  EXPECT_EQ(s.ooms, 1);
  ASSERT_TRUE(s.first_oom.has_value());
  EXPECT_EQ(s.first_oom->event_index, 1);
  EXPECT_EQ(s.first_oom->line, 2);
  EXPECT_EQ(s.first_oom->handle, "big");
  EXPECT_EQ(s.first_oom->label, "the step that does not fit");
  EXPECT_EQ(s.first_oom->message.rfind(
                "CUDA out of memory. Tried to allocate 80.00 MiB. GPU 0 has a total "
                "capacity of 100.00 MiB of which 40.00 MiB is free.",
                0),
            0u);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(s.notes[0], "line 3: free of 'big' ignored: its allocation failed with OOM");
  EXPECT_EQ(s.final_allocated_bytes, 90 * kMiB);  // c reused nothing: 60 MiB freed, then 90 MiB
}

TEST(ReplayTest, HandleMisuseIsAnErrorWithTheLine) {
  auto r = Replay("alloc a 10\nfree a\nfree a\n", {Options("", kGiB)});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().Describe(), "t.trace:3: double free of handle 'a'");
  r = Replay("alloc a 10\nfree b\n", {Options("", kGiB)});
  EXPECT_EQ(r.error().Describe(), "t.trace:2: free of unknown handle 'b'");
  r = Replay("alloc a 10\nalloc a 10\n", {Options("", kGiB)});
  EXPECT_EQ(r.error().Describe(), "t.trace:2: alloc of handle 'a', which is already allocated");
  r = Replay("alloc a 10\nfree_completed a\n", {Options("", kGiB)});
  EXPECT_EQ(r.error().Describe(),
            "t.trace:2: free_completed of handle 'a', which has no free waiting for record_stream "
            "events");
}

TEST(ReplayTest, RecordStreamWithExplicitCompletion) {
  SimulatorOptions o = Options("", kGiB);
  o.pending_frees = PendingFreeCompletion::kExplicit;
  auto r = Replay(
      "alloc a 30MiB\nrecord_stream a 7\nfree a\nalloc b 30MiB\nfree_completed a\nalloc a 30MiB\n",
      {o});
  ASSERT_TRUE(r.has_value()) << r.error().Describe();
  EXPECT_EQ((*r)[0].final_reserved_bytes, 60 * kMiB);  // b could not reuse a; the third alloc did
}

TEST(ReplayTest, TimelineSeesEveryEvent) {
  std::istringstream in("alloc a 1MiB\nfree a\nempty_cache\n");
  ReplayOptions options;
  options.simulators = {Options("", kGiB)};
  std::vector<std::int64_t> reserved;
  options.on_event = [&](std::int64_t, const TraceEvent&, const std::vector<TimelineSample>& s) {
    reserved.push_back(s[0].reserved_bytes);
  };
  ASSERT_TRUE(ReplayTrace(in, "t", options).has_value());
  EXPECT_EQ(reserved, (std::vector<std::int64_t>{2 * kMiB, 2 * kMiB, 0}));
}

}  // namespace
}  // namespace memtune::alloc
