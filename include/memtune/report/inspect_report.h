// Renderers for `memtune inspect`: a human-readable text report and the JSON document
// (schema "memtune.inspect/1", fields described in docs/snapshot.md).
#pragma once

#include <string>

#include "memtune/snapshot/inspect.h"

namespace memtune::report {

// The text report, one section per device, ending with a newline. Deterministic: no
// timestamps other than the trace's own time span, no absolute paths.
std::string RenderInspectText(const snapshot::InspectReport& report);

// The JSON document, pretty-printed with 2 spaces, ending with a newline. Strings that are
// not valid UTF-8 (frame names from a damaged file) are written with U+FFFD replacements.
std::string RenderInspectJson(const snapshot::InspectReport& report);

// "current", "history" or "segment_list".
const char* SnapshotFormatName(snapshot::SnapshotFormat format);

// One line describing the settings: 'PYTORCH_CUDA_ALLOC_CONF="..."; expandable_segments:
// False; ...' or "not recorded (snapshot older than PyTorch ~2.4)".
std::string DescribeSettings(const snapshot::AllocatorSettings& settings);

}  // namespace memtune::report
