// ReadPickle: opcode coverage, refusals with their exact text, truncation, bombs.
#include "memtune/snapshot/pickle.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "snapshot/pickle_test_util.h"

namespace memtune::snapshot {
namespace {

using testing_util::P;
using testing_util::ReadData;

std::string ErrorOf(const std::string& bytes, const PickleLimits& limits = {}) {
  auto doc = ReadPickle(bytes, limits);
  return doc ? std::string("<ok>") : doc.error().message;
}

TEST(PickleTest, ScalarsProtocol4) {
  // {"a": None, "b": True, "c": False, "i": -1, "j": 300, "k": 7, "f": 1.5, "s": "xy"}
  std::string p = P("\x80\x04}\x94(") + P("\x8c\x01" "a") + "N" + P("\x8c\x01" "b") + "\x88" +
                  P("\x8c\x01" "c") + "\x89" + P("\x8c\x01" "i") + P("J\xff\xff\xff\xff") +
                  P("\x8c\x01" "j") + P("M\x2c\x01") + P("\x8c\x01" "k") + P("K\x07") +
                  P("\x8c\x01" "f") + P("G\x3f\xf8\x00\x00\x00\x00\x00\x00") +
                  P("\x8c\x01" "s") + P("X\x02\x00\x00\x00xy") + "u.";
  auto doc = ReadPickle(p);
  ASSERT_TRUE(doc) << doc.error().message;
  PickleValue root = doc->root();
  ASSERT_EQ(root.kind(), PickleKind::kDict);
  EXPECT_EQ(root.size(), 8u);
  EXPECT_EQ(root.Find("a")->kind(), PickleKind::kNone);
  EXPECT_TRUE(root.Find("b")->AsBool());
  EXPECT_FALSE(root.Find("c")->AsBool());
  EXPECT_EQ(root.Find("i")->AsInt(), -1);
  EXPECT_EQ(root.Find("j")->AsInt(), 300);
  EXPECT_EQ(root.Find("k")->AsInt(), 7);
  EXPECT_EQ(root.Find("f")->AsFloat(), 1.5);
  EXPECT_EQ(root.Find("s")->AsStr(), "xy");
  EXPECT_FALSE(root.Find("zz").has_value());
}

TEST(PickleTest, Long1AndLong4) {
  // [0x7f0200000000 (6 bytes), -2^40, 2^63 (9 bytes), 0 (LONG1 with n=0), 5 via LONG4]
  std::string p = P("\x80\x02](") + P("\x8a\x06\x00\x00\x00\x00\x02\x7f") +
                  P("\x8a\x06\x00\x00\x00\x00\x00\xff") +
                  P("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00") + P("\x8a\x00") +
                  P("\x8b\x01\x00\x00\x00\x05") + "e.";
  auto doc = ReadPickle(p);
  ASSERT_TRUE(doc) << doc.error().message;
  PickleValue l = doc->root();
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l.at(0).AsInt(), 0x7f0200000000LL);
  EXPECT_EQ(l.at(1).AsInt(), -(1LL << 40));
  EXPECT_TRUE(l.at(2).IsUnsignedInt());
  EXPECT_EQ(static_cast<std::uint64_t>(l.at(2).AsInt()), 1ULL << 63);
  EXPECT_EQ(l.at(3).AsInt(), 0);
  EXPECT_EQ(l.at(4).AsInt(), 5);
}

TEST(PickleTest, WideIntegerIsRefused) {
  EXPECT_EQ(ErrorOf(P("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.")),
            "not a memory snapshot: LONG1 at byte 2 holds an integer wider than 64 bits");
}

TEST(PickleTest, ContainersTuplesAndMemo) {
  // (d = {}, [d, d], (1,), (1, 2, 3), tuple-from-mark, list-from-mark, dict-from-mark)
  std::string p = P("\x80\x02(}q\x00]q\x01(h\x00h\x00" "eK\x01\x85K\x01K\x02K\x03\x87") +
                  P("(K\x01K\x02t(K\x03l(X\x01\x00\x00\x00kK\x04" "dt.");
  auto doc = ReadPickle(p);
  ASSERT_TRUE(doc) << doc.error().message;
  PickleValue t = doc->root();
  ASSERT_EQ(t.kind(), PickleKind::kTuple);
  ASSERT_EQ(t.size(), 7u);
  PickleValue list = t.at(1);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list.at(0).id(), t.at(0).id());  // memo-shared, not copied
  EXPECT_EQ(list.at(1).id(), t.at(0).id());
  EXPECT_EQ(t.at(2).size(), 1u);
  EXPECT_EQ(t.at(3).at(2).AsInt(), 3);
  EXPECT_EQ(t.at(4).kind(), PickleKind::kTuple);
  EXPECT_EQ(t.at(5).kind(), PickleKind::kList);
  EXPECT_EQ(t.at(6).Find("k")->AsInt(), 4);
}

TEST(PickleTest, SetItemAppendAndLastKeyWins) {
  std::string p = P("\x80\x04}\x94\x8c\x01" "a\x94K\x01s\x8c\x01" "aK\x02s") +
                  P("\x8c\x01" "b]K\x05" "a" "s.");
  auto doc = ReadPickle(p);
  ASSERT_TRUE(doc) << doc.error().message;
  EXPECT_EQ(doc->root().Find("a")->AsInt(), 2);
  EXPECT_EQ(doc->root().Find("b")->at(0).AsInt(), 5);
}

TEST(PickleTest, InterleavedBatchesKeepTheirOrder) {
  // L = [], M = []; M.append(1); L.append(2); M.append(3); L.append(4); M.extend([5, 6]);
  // M.extend([7]); L.append(M). Batches of one list land between those of the other.
  std::string p = P("\x80\x04]\x94]\x94K\x01" "a0K\x02" "ah\x01K\x03" "a0K\x04" "a") +
                  P("h\x01(K\x05K\x06" "e(K\x07" "e0h\x01" "a.");
  auto doc = ReadPickle(p);
  ASSERT_TRUE(doc) << doc.error().message;
  PickleValue l = doc->root();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l.at(0).AsInt(), 2);
  EXPECT_EQ(l.at(1).AsInt(), 4);
  PickleValue m = l.at(2);
  ASSERT_EQ(m.size(), 5u);
  const std::int64_t want[] = {1, 3, 5, 6, 7};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(m.at(i).AsInt(), want[i]) << i;
}

TEST(PickleTest, FramesBytesPopDupAndLongStrings) {
  // FRAME, SHORT_BINBYTES, BINBYTES, BINUNICODE8, DUP, POP, POP_MARK.
  std::string p = P("\x80\x05\x95\x10\x00\x00\x00\x00\x00\x00\x00]") + P("C\x02hi") +
                  P("B\x01\x00\x00\x00z") + P("\x8d\x03\x00\x00\x00\x00\x00\x00\x00" "abc") +
                  P("\x88\x32" "00(K\x01K\x02" "1") + P("\x87" "a.");
  auto doc = ReadPickle(p);
  ASSERT_TRUE(doc) << doc.error().message;
  PickleValue t = doc->root().at(0);
  EXPECT_EQ(t.at(0).kind(), PickleKind::kBytes);
  EXPECT_EQ(t.at(0).AsStr(), "hi");
  EXPECT_EQ(t.at(1).AsStr(), "z");
  EXPECT_EQ(t.at(2).AsStr(), "abc");
}

TEST(PickleTest, OrderedDictAndTorchScriptHelpersAreAllowed) {
  // collections.OrderedDict() via STACK_GLOBAL, then restore_type_tag(dict, "Dict[str,int]")
  // and build_intlist([1]) via GLOBAL, as the TorchScript pickler writes them.
  std::string p = P("\x80\x04]\x94(\x8c\x0b" "collections\x8c\x0b" "OrderedDict\x93)R") +
                  P("\x8c\x01xK\x01s") +
                  P("ctorch.jit._pickle\nrestore_type_tag\n(}\x8c\x01yK\x02s") +
                  P("\x8c\x0d" "Dict[str,int]tR") + P("ctorch.jit._pickle\nbuild_intlist\n(]K\x01" "atR") +
                  "e.";
  auto doc = ReadPickle(p);
  ASSERT_TRUE(doc) << doc.error().message;
  PickleValue l = doc->root();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l.at(0).Find("x")->AsInt(), 1);
  EXPECT_EQ(l.at(1).Find("y")->AsInt(), 2);
  EXPECT_EQ(l.at(2).at(0).AsInt(), 1);
}

TEST(PickleTest, ImportsAreRefused) {
  EXPECT_EQ(ErrorOf(P("\x80\x02" "cos\nsystem\n(X\x02\x00\x00\x00lstR.")),
            "not a memory snapshot: GLOBAL at byte 2 imports 'os.system'; memtune reads only "
            "plain data and imports nothing but collections.OrderedDict and torch.jit._pickle "
            "helpers");
  EXPECT_EQ(ErrorOf(P("\x80\x04\x8c\x08" "builtins\x8c\x04" "eval\x93.")),
            "not a memory snapshot: STACK_GLOBAL at byte 18 imports 'builtins.eval'; memtune "
            "reads only plain data and imports nothing but collections.OrderedDict and "
            "torch.jit._pickle helpers");
}

TEST(PickleTest, ObjectBuildingOpcodesAreRefused) {
  const std::string tail =
      " would build a Python object; memtune reads only plain data (dict, list, tuple, str, "
      "bytes, int, float, bool, None)";
  EXPECT_EQ(ErrorOf(P("\x80\x02}}b.")), "not a memory snapshot: BUILD at byte 4" + tail);
  EXPECT_EQ(ErrorOf(P("\x80\x02(i__main__\nX\n.")), "not a memory snapshot: INST at byte 3" + tail);
  EXPECT_EQ(ErrorOf(P("\x80\x02(o.")), "not a memory snapshot: OBJ at byte 3" + tail);
  EXPECT_EQ(ErrorOf(P("\x80\x02)\x81.")), "not a memory snapshot: NEWOBJ at byte 3" + tail);
  EXPECT_EQ(ErrorOf(P("\x80\x04))}\x92.")), "not a memory snapshot: NEWOBJ_EX at byte 5" + tail);
  EXPECT_EQ(ErrorOf(P("\x80\x02K\x01Q.")), "not a memory snapshot: BINPERSID at byte 4" + tail);
  EXPECT_EQ(ErrorOf(P("\x80\x02\x82\x01.")), "not a memory snapshot: EXT1 at byte 2" + tail);
}

TEST(PickleTest, ReduceOnDataIsRefused) {
  EXPECT_EQ(ErrorOf(P("\x80\x02K\x01)R.")),
            "not a memory snapshot: REDUCE at byte 5 calls a int; only the allowed imports may "
            "be called");
  EXPECT_EQ(ErrorOf(P("\x80\x02" "ccollections\nOrderedDict\n.")),
            "not a memory snapshot: STOP at byte 27 returns an imported Python object");
  EXPECT_EQ(ErrorOf(P("\x80\x02]" "ccollections\nOrderedDict\na.")),
            "not a memory snapshot: APPEND at byte 28 stores an imported Python object into a "
            "container");
}

TEST(PickleTest, UnusedAndUnknownOpcodesAreRefused) {
  EXPECT_EQ(ErrorOf(P("\x80\x04\x8f.")),
            "not a memory snapshot: EMPTY_SET at byte 2 is not used by PyTorch memory snapshots");
  EXPECT_EQ(ErrorOf(P("\x80\x02I1\n.")),
            "not a memory snapshot: INT at byte 2 is not used by PyTorch memory snapshots");
  EXPECT_EQ(ErrorOf(P("\x80\x02\xff.")),
            "not a pickle: byte 0xFF at byte 2 is not a pickle opcode");
}

TEST(PickleTest, NotAPickle) {
  EXPECT_EQ(ErrorOf(""), "not a pickle: the data is empty; a memory snapshot starts with PROTO (0x80)");
  EXPECT_EQ(ErrorOf("{\"segments\": []}"),
            "not a pickle: it starts with byte 0x7B; a memory snapshot starts with PROTO (0x80)");
  EXPECT_EQ(ErrorOf(P("\x80\x01N.")),
            "not a memory snapshot: PROTO at byte 0 names protocol 1; memtune reads protocols 2-5");
}

TEST(PickleTest, MalformedStacks) {
  EXPECT_EQ(ErrorOf(P("\x80\x02.")), "malformed pickle: STOP at byte 2 pops from an empty stack");
  EXPECT_EQ(ErrorOf(P("\x80\x02K")), "truncated pickle: BININT1 at byte 2 needs 1 bytes, 0 left");
  EXPECT_EQ(ErrorOf(P("\x80\x02}K\x01u.")), "malformed pickle: SETITEMS at byte 5 has no MARK");
  EXPECT_EQ(ErrorOf(P("\x80\x02](K\x01u.")),
            "malformed pickle: SETITEMS at byte 6 needs a dict below its items, not a list");
  EXPECT_EQ(ErrorOf(P("\x80\x02}(K\x01u.")),
            "malformed pickle: SETITEMS at byte 6 has a key without a value");
  EXPECT_EQ(ErrorOf(P("\x80\x02(K\x01\x86.")),
            "malformed pickle: TUPLE2 at byte 5 pops from an empty stack");
  EXPECT_EQ(ErrorOf(P("\x80\x02h\x03.")),
            "malformed pickle: BINGET at byte 2 reads memo entry 3, which was never stored");
  EXPECT_EQ(ErrorOf(P("\x80\x02q\x00.")), "malformed pickle: BINPUT at byte 2 pops from an empty stack");
  EXPECT_EQ(ErrorOf(P("\x80\x02\x31.")), "malformed pickle: POP_MARK at byte 2 has no MARK to pop");
}

TEST(PickleTest, CyclesAreRefused) {
  // l = []; l.append(l)
  EXPECT_EQ(ErrorOf(P("\x80\x02]q\x00h\x00" "a.")),
            "malformed pickle: APPEND at byte 7 stores a container into itself");
  // a = []; b = [a]; (b, a) shares a: fine.
  EXPECT_EQ(ErrorOf(P("\x80\x02]q\x00]h\x00" "ah\x00\x86.")), "<ok>");
  // a = []; b = [a]; a.append(b): a was sealed when stored in b.
  EXPECT_EQ(ErrorOf(P("\x80\x02]q\x00]q\x01h\x00" "a0h\x00h\x01" "a.")),
            "malformed pickle: APPEND at byte 16 changes a container after it was stored in "
            "another one");
}

TEST(PickleTest, DepthBomb) {
  std::string p = "\x80\x02";
  for (int i = 0; i < 100; ++i) p += ']';
  for (int i = 0; i < 99; ++i) p += 'a';
  p += '.';
  EXPECT_EQ(ErrorOf(p),
            "malformed pickle: APPEND at byte 165 nests containers deeper than 64 levels");
  PickleLimits deep;
  deep.max_depth = 200;
  EXPECT_EQ(ErrorOf(p, deep), "<ok>");
}

TEST(PickleTest, HugeLengthClaims) {
  EXPECT_EQ(ErrorOf(P("\x80\x02X\xff\xff\xff\xff" "abc.")),
            "truncated pickle: BINUNICODE at byte 2 needs 4294967295 bytes, 4 left");
  EXPECT_EQ(ErrorOf(P("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.")),
            "truncated pickle: BINUNICODE8 at byte 2 needs 18446744073709551615 bytes, 1 left");
  EXPECT_EQ(ErrorOf(P("\x80\x04\x95\x00\x00\x00\x00\x00\x01\x00\x00N.")),
            "truncated pickle: FRAME at byte 2 needs 1099511627776 bytes, 2 left");
  EXPECT_EQ(ErrorOf(P("\x80\x02\x8b\xff\xff\xff\x7f.")),
            "truncated pickle: LONG4 at byte 2 needs 2147483647 bytes, 1 left");
  EXPECT_EQ(ErrorOf(P("\x80\x02\x8b\xff\xff\xff\xff.")),
            "malformed pickle: LONG4 at byte 2 has a negative length");
  EXPECT_EQ(ErrorOf(P("\x80\x02r\xff\xff\xff\xffh\x00.")),
            "malformed pickle: LONG_BINPUT at byte 2 pops from an empty stack");
}

TEST(PickleTest, MissingStop) {
  EXPECT_EQ(ErrorOf(P("\x80\x02N")),
            "truncated pickle: the data ends at byte 3 before the STOP opcode");
  EXPECT_EQ(ErrorOf(P("\x80\x02" "cos\nsys")),
            "truncated pickle: GLOBAL at byte 2 has no \"module\\nname\\n\" operand");
}

TEST(PickleTest, MemoryBound) {
  std::string p = "\x80\x02(";
  for (int i = 0; i < 100000; ++i) p += ']';
  p += "l.";
  PickleLimits tight;
  tight.max_memory_bytes = 1 << 20;
  EXPECT_EQ(ErrorOf(p, tight).rfind("pickle too large: reading it needs more than 1048576 bytes", 0), 0u);
  auto doc = ReadPickle(p);
  ASSERT_TRUE(doc);
  // Within a small multiple of the input even for this worst case (1 byte -> 1 value).
  EXPECT_LT(doc->memory_bytes(), 48 * static_cast<std::int64_t>(p.size()));
}

TEST(PickleTest, EveryTruncationOfARealFileFails) {
  const std::string file = ReadData("example2_native.pickle");
  ASSERT_TRUE(ReadPickle(file));
  for (std::size_t n = 0; n < file.size(); ++n) {
    auto doc = ReadPickle(file.substr(0, n));
    ASSERT_FALSE(doc) << "prefix of " << n << " bytes was accepted";
  }
}

TEST(PickleTest, EveryTruncationOfAProtocol2FileFails) {
  const std::string file = ReadData("example2_native_protocol2.pickle");
  ASSERT_TRUE(ReadPickle(file));
  for (std::size_t n = 0; n < file.size(); ++n) {
    ASSERT_FALSE(ReadPickle(file.substr(0, n))) << "prefix of " << n << " bytes was accepted";
  }
}

}  // namespace
}  // namespace memtune::snapshot
