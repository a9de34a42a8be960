// The rows of ignored_fields.h, one table a file (private to src/model).
#pragma once

#include <span>

#include "memtune/model/ignored_fields.h"

namespace memtune::model::internal {

std::span<const IgnoredInput> MemoryRelevantFlags();  // ignored_flags_memory.cc
std::span<const IgnoredInput> OtherFlags();           // ignored_flags_other.cc
std::span<const IgnoredInput> BridgeFields();         // ignored_fields_bridge.cc

}  // namespace memtune::model::internal
