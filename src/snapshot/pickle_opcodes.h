// Pickle opcode bytes and names (CPython Lib/pickle.py, protocols 0-5).
#pragma once

#include <cstdint>
#include <string>

namespace memtune::snapshot {

// Opcodes the reader accepts.
inline constexpr std::uint8_t kProto = 0x80, kFrame = 0x95, kStop = '.', kMark = '(', kPop = '0',
                              kPopMark = '1', kDup = '2', kNone = 'N', kNewTrue = 0x88,
                              kNewFalse = 0x89, kBinInt = 'J', kBinInt1 = 'K', kBinInt2 = 'M',
                              kLong1 = 0x8a, kLong4 = 0x8b, kBinFloat = 'G',
                              kShortBinUnicode = 0x8c, kBinUnicode = 'X', kBinUnicode8 = 0x8d,
                              kShortBinBytes = 'C', kBinBytes = 'B', kBinBytes8 = 0x8e,
                              kEmptyDict = '}', kEmptyList = ']', kEmptyTuple = ')', kDict = 'd',
                              kList = 'l', kTuple = 't', kTuple1 = 0x85, kTuple2 = 0x86,
                              kTuple3 = 0x87, kSetItem = 's', kSetItems = 'u', kAppend = 'a',
                              kAppends = 'e', kMemoize = 0x94, kBinPut = 'q', kLongBinPut = 'r',
                              kBinGet = 'h', kLongBinGet = 'j', kGlobal = 'c', kStackGlobal = 0x93,
                              kReduce = 'R';

// "SETITEMS", "REDUCE", ... or "opcode 0xNN" for a byte that is no pickle opcode.
const char* OpcodeName(std::uint8_t op);

// True for opcodes that exist in some pickle protocol.
bool IsKnownOpcode(std::uint8_t op);

// True for opcodes whose purpose is to build or call arbitrary Python objects
// (INST, OBJ, BUILD, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID, buffers).
bool BuildsObjects(std::uint8_t op);

// "0x7B".
std::string HexByte(std::uint8_t b);

}  // namespace memtune::snapshot
