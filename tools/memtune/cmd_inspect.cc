// memtune inspect: what a PyTorch memory snapshot says about each device.
#include <iostream>

#include "command.h"
#include "commands.h"
#include "memtune/report/inspect_report.h"
#include "memtune/snapshot/inspect.h"
#include "snapshot_input.h"

namespace memtune::cli {

int RunInspect(int argc, char** argv) {
  CLI::App app(
      "Summarise a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, .pickle or "
      ".pickle.gz): reserved/allocated/fragmentation per device, top allocation sites, peaks "
      "over the trace, recorded OOMs and the allocator settings.",
      "memtune inspect");
  app.footer("Example:\n  memtune inspect snapshot.pickle --frames 2 --format json");
  std::string path;
  snapshot::InspectOptions options;
  OutputFormat format = OutputFormat::kText;
  app.add_option("SNAPSHOT", path, "snapshot file (pickle, optionally gzip'd)")->required();
  app.add_option("--frames", options.frames_depth,
                 "stack frames that identify an allocation site (default: 3)");
  app.add_option("--top", options.top_sites, "allocation sites listed per device (default: 10)");
  std::string max_size;
  AddSnapshotSizeOption(app, max_size);
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;

  auto snap = LoadSnapshotArg(path, max_size);
  if (!snap) return PrintError("inspect", snap.error());
  auto report = snapshot::Inspect(*snap, options);
  if (!report) return PrintError("inspect", report.error());
  std::cout << (format == OutputFormat::kJson ? report::RenderInspectJson(*report)
                                              : report::RenderInspectText(*report));
  return kExitOk;
}

}  // namespace memtune::cli
