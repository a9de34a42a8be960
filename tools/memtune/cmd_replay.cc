// memtune replay: re-run a snapshot's trace through the allocator simulator, as a check
// under the recorded settings and as a what-if under another PYTORCH_CUDA_ALLOC_CONF.
#include <iostream>

#include "command.h"
#include "commands.h"
#include "memtune/core/units.h"
#include "memtune/report/replay_report.h"
#include "memtune/snapshot/replay.h"
#include "snapshot_input.h"

namespace memtune::cli {

int RunReplay(int argc, char** argv) {
  CLI::App app(
      "Replay a PyTorch memory snapshot's trace through memtune's allocator simulator. Under "
      "the recorded settings it checks that every segment event and address is reproduced; "
      "with --alloc-conf it reports peak reserved memory and the OOM verdict next to what "
      "was recorded.",
      "memtune replay");
  app.footer("Example:\n  memtune replay snapshot.pickle --alloc-conf expandable_segments:True");
  std::string path, conf, capacity, version;
  OutputFormat format = OutputFormat::kText;
  app.add_option("SNAPSHOT", path, "snapshot file (pickle, optionally gzip'd)")->required();
  app.add_option("--alloc-conf", conf,
                 "PYTORCH_CUDA_ALLOC_CONF to replay under (default: the recorded one)");
  app.add_option(
      "--capacity", capacity,
      "memory PyTorch may use, e.g. 79GiB (default: from the recorded OOM, else unlimited)");
  app.add_option("--torch-version", version,
                 "PyTorch release whose allocator rules apply (default: 2.9)");
  std::string max_size;
  AddSnapshotSizeOption(app, max_size);
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  snapshot::ReplayOptions options;
  if (app.count("--alloc-conf") > 0) options.alloc_conf = conf;
  if (!capacity.empty()) {
    auto bytes = ParseDeviceBytes(capacity, "--capacity");
    if (!bytes) return PrintError("replay", bytes.error());
    options.capacity_bytes = *bytes;
  }
  if (!version.empty()) {
    auto parsed = alloc::ParseTorchVersion(version, "--torch-version");
    if (!parsed) return PrintError("replay", parsed.error());
    options.torch_version = *parsed;
  }
  auto snap = LoadSnapshotArg(path, max_size);
  if (!snap) return PrintError("replay", snap.error());
  auto report = snapshot::Replay(*snap, options);
  if (!report) return PrintError("replay", report.error());
  std::cout << (format == OutputFormat::kJson ? report::RenderReplayJson(*report)
                                              : report::RenderReplayText(*report));
  // A check that diverges is a finding; a what-if that completed is the answer asked for.
  if (options.alloc_conf) return kExitOk;
  for (const auto& d : report->devices) {
    if (d.divergence) return kExitFindings;  // the simulator does not match the recording
  }
  return kExitOk;
}

}  // namespace memtune::cli
