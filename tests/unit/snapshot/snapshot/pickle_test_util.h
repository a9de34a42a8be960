// Helpers for the snapshot tests: byte strings with embedded NULs and test data files.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace memtune::snapshot::testing_util {

// A std::string from a literal that may contain '\0' (the whole array minus the final NUL).
template <std::size_t N>
std::string P(const char (&bytes)[N]) {
  return std::string(bytes, N - 1);
}

inline std::string DataPath(const std::string& name) {
  return std::string(MEMTUNE_SOURCE_DIR) + "/tests/data/snapshots/" + name;
}

// The bytes of tests/data/snapshots/<name> ("" when missing; tests then fail loudly).
inline std::string ReadData(const std::string& name) {
  std::ifstream in(DataPath(name), std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace memtune::snapshot::testing_util
