// Names of pickle opcodes, for error messages (CPython Lib/pickletools.py names them).
#include "snapshot/pickle_opcodes.h"

#include <cstdio>

namespace memtune::snapshot {
namespace {

struct OpInfo {
  std::uint8_t op;
  const char* name;
  bool builds_objects;
};

constexpr OpInfo kOps[] = {
    {'(', "MARK", false},
    {'.', "STOP", false},
    {'0', "POP", false},
    {'1', "POP_MARK", false},
    {'2', "DUP", false},
    {'F', "FLOAT", false},
    {'I', "INT", false},
    {'J', "BININT", false},
    {'K', "BININT1", false},
    {'L', "LONG", false},
    {'M', "BININT2", false},
    {'N', "NONE", false},
    {'P', "PERSID", true},
    {'Q', "BINPERSID", true},
    {'R', "REDUCE", false},
    {'S', "STRING", false},
    {'T', "BINSTRING", false},
    {'U', "SHORT_BINSTRING", false},
    {'V', "UNICODE", false},
    {'X', "BINUNICODE", false},
    {'a', "APPEND", false},
    {'b', "BUILD", true},
    {'c', "GLOBAL", false},
    {'d', "DICT", false},
    {'}', "EMPTY_DICT", false},
    {'e', "APPENDS", false},
    {'g', "GET", false},
    {'h', "BINGET", false},
    {'i', "INST", true},
    {'j', "LONG_BINGET", false},
    {'l', "LIST", false},
    {']', "EMPTY_LIST", false},
    {'o', "OBJ", true},
    {'p', "PUT", false},
    {'q', "BINPUT", false},
    {'r', "LONG_BINPUT", false},
    {'s', "SETITEM", false},
    {'t', "TUPLE", false},
    {')', "EMPTY_TUPLE", false},
    {'u', "SETITEMS", false},
    {'G', "BINFLOAT", false},
    {0x80, "PROTO", false},
    {0x81, "NEWOBJ", true},
    {0x82, "EXT1", true},
    {0x83, "EXT2", true},
    {0x84, "EXT4", true},
    {0x85, "TUPLE1", false},
    {0x86, "TUPLE2", false},
    {0x87, "TUPLE3", false},
    {0x88, "NEWTRUE", false},
    {0x89, "NEWFALSE", false},
    {0x8a, "LONG1", false},
    {0x8b, "LONG4", false},
    {'B', "BINBYTES", false},
    {'C', "SHORT_BINBYTES", false},
    {0x8c, "SHORT_BINUNICODE", false},
    {0x8d, "BINUNICODE8", false},
    {0x8e, "BINBYTES8", false},
    {0x8f, "EMPTY_SET", false},
    {0x90, "ADDITEMS", false},
    {0x91, "FROZENSET", false},
    {0x92, "NEWOBJ_EX", true},
    {0x93, "STACK_GLOBAL", false},
    {0x94, "MEMOIZE", false},
    {0x95, "FRAME", false},
    {0x96, "BYTEARRAY8", false},
    {0x97, "NEXT_BUFFER", true},
    {0x98, "READONLY_BUFFER", true},
};

const OpInfo* Find(std::uint8_t op) {
  for (const OpInfo& info : kOps) {
    if (info.op == op) return &info;
  }
  return nullptr;
}

}  // namespace

const char* OpcodeName(std::uint8_t op) {
  const OpInfo* info = Find(op);
  return info != nullptr ? info->name : "unknown opcode";
}

bool IsKnownOpcode(std::uint8_t op) { return Find(op) != nullptr; }

bool BuildsObjects(std::uint8_t op) {
  const OpInfo* info = Find(op);
  return info != nullptr && info->builds_objects;
}

std::string HexByte(std::uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02X", b);
  return buf;
}

}  // namespace memtune::snapshot
