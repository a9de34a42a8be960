// A YAML scalar for a double in its shortest round-trip form (0.1, not 0.10000000000000001).
#pragma once

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <string>

namespace memtune::model {

inline YAML::Node ShortestNumberNode(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return YAML::Node(std::string(buffer, result.ptr));
}

}  // namespace memtune::model
