// Renderers for `memtune replay`: text and JSON (schema "memtune.replay/1", fields in
// docs/snapshot.md).
#pragma once

#include <string>

#include "memtune/snapshot/replay.h"

namespace memtune::report {

// The text report: per device the check against the recording (or its first divergence),
// the capacity used, and "recorded: ...; with <config>: ..." side by side.
std::string RenderReplayText(const snapshot::ReplayReport& report);

// The JSON document, pretty-printed with 2 spaces, ending with a newline.
std::string RenderReplayJson(const snapshot::ReplayReport& report);

}  // namespace memtune::report
