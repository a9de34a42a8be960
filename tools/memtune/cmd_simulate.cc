// memtune simulate: replay an allocation trace through the simulated caching allocator.
#include <fstream>
#include <iostream>
#include <map>

#include "command.h"
#include "commands.h"
#include "memtune/alloc/replay.h"
#include "memtune/core/file.h"
#include "memtune/core/units.h"
#include "memtune/report/simulate_report.h"

namespace memtune::cli {
namespace {

struct SimulateFlags {
  std::string trace;
  std::string alloc_conf;
  std::string compare;
  bool has_compare = false;
  std::string capacity;
  std::string non_pytorch = "0";
  std::string torch_version = alloc::kDefaultTorchVersion.ToString();
  std::string timeline;
  double memory_fraction = -1.0;
  alloc::PendingFreeCompletion pending = alloc::PendingFreeCompletion::kAtNextMalloc;
  bool fail_if_oom = false;
  OutputFormat format = OutputFormat::kText;
};

void AddFlags(CLI::App& app, SimulateFlags& f) {
  app.add_option("TRACE", f.trace, "allocation trace (docs/trace-format.md); - reads stdin")
      ->required();
  app.add_option("--alloc-conf", f.alloc_conf, "PYTORCH_CUDA_ALLOC_CONF string (default: empty)");
  app.add_option("--capacity", f.capacity, "device memory, e.g. 80GiB")->required();
  app.add_option("--non-pytorch", f.non_pytorch,
                 "memory held outside PyTorch (context, NCCL), e.g. 1.5GiB");
  app.add_option("--torch-version", f.torch_version,
                 "PyTorch release whose rules apply: 2.1 to 2.10 or main (default: " +
                     alloc::kDefaultTorchVersion.ToString() + ")");
  app.add_option("--compare", f.compare, "a second PYTORCH_CUDA_ALLOC_CONF to run side by side");
  app.add_option("--timeline", f.timeline, "write the counters after every event to this CSV file");
  app.add_option("--memory-fraction", f.memory_fraction,
                 "call set_per_process_memory_fraction(F) first")
      ->check(CLI::Range(0.0, 1.0))
      ->check(FiniteNumber());
  static const std::map<std::string, alloc::PendingFreeCompletion> kPending = {
      {"next-alloc", alloc::PendingFreeCompletion::kAtNextMalloc},
      {"explicit", alloc::PendingFreeCompletion::kExplicit}};
  app.add_option("--pending-frees", f.pending,
                 "when record_stream-deferred frees complete: next-alloc (default) or explicit "
                 "(free_completed lines)")
      ->transform(CLI::CheckedTransformer(kPending).description(""))
      ->option_text("next-alloc|explicit");
  app.add_flag("--fail-if-oom", f.fail_if_oom, "exit with status 1 when any OOM happened");
  AddFormatOption(app, f.format);
}

// Simulator options for one configuration string; `flag` names it in errors.
Result<alloc::SimulatorOptions> MakeOptions(const SimulateFlags& f, const std::string& conf,
                                            const char* flag, alloc::TorchVersion version) {
  alloc::SimulatorOptions o;
  auto cfg = alloc::ParseAllocatorConfig(conf, version);
  if (!cfg) {
    Error e = cfg.error();
    e.field = flag;
    return e;
  }
  o.config = *cfg;
  MEMTUNE_TRY(o.capacity_bytes, ParseDeviceBytes(f.capacity, "--capacity"));
  MEMTUNE_TRY(o.non_pytorch_bytes, ParseBytes(f.non_pytorch, "--non-pytorch"));
  if (f.memory_fraction >= 0.0) o.memory_fraction = f.memory_fraction;
  o.pending_frees = f.pending;
  return o;
}

}  // namespace

int RunSimulate(int argc, char** argv) {
  CLI::App app(
      "Replay an allocation trace through a simulation of PyTorch's CUDA caching allocator "
      "(native or expandable segments) and report peak allocated/reserved memory, "
      "fragmentation at the peak, device calls, retries and the first OOM with PyTorch's message.",
      "memtune simulate");
  app.footer(
      "Example:\n  memtune simulate step.trace --capacity 80GiB --compare "
      "expandable_segments:True");
  SimulateFlags f;
  AddFlags(app, f);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;
  f.has_compare = app.count("--compare") > 0;

  auto version = alloc::ParseTorchVersion(f.torch_version, "--torch-version");
  if (!version) return PrintError("simulate", version.error());
  alloc::ReplayOptions options;
  auto base = MakeOptions(f, f.alloc_conf, "--alloc-conf", *version);
  if (!base) return PrintError("simulate", base.error());
  options.simulators.push_back(*base);
  if (f.has_compare) {
    auto other = MakeOptions(f, f.compare, "--compare", *version);
    if (!other) return PrintError("simulate", other.error());
    options.simulators.push_back(*other);
  }
  for (const auto& sim : options.simulators) {
    for (const std::string& w : sim.config.warnings)
      PrintWarning("simulate", "PyTorch would warn: " + w);
  }

  std::ifstream file;
  if (f.trace != "-") {
    if (auto dir = CheckNotDirectory(f.trace, "TRACE"); !dir)
      return PrintError("simulate", dir.error());
    file.open(f.trace);
    if (!file) return PrintError("simulate", NotFound("TRACE", "cannot open '" + f.trace + "'"));
  }
  std::ofstream timeline;
  if (!f.timeline.empty()) {
    timeline.open(f.timeline);
    if (!timeline)
      return PrintError("simulate",
                        InvalidInput("--timeline", "cannot write '" + f.timeline + "'"));
    report::WriteTimelineCsvHeader(timeline, options.simulators.size());
    options.on_event = [&timeline](std::int64_t i, const alloc::TraceEvent& e,
                                   const std::vector<alloc::TimelineSample>& s) {
      report::WriteTimelineCsvRow(timeline, i, e, s);
    };
  }
  auto summaries = alloc::ReplayTrace(f.trace == "-" ? std::cin : file,
                                      f.trace == "-" ? "<stdin>" : f.trace, options);
  if (!summaries) return PrintError("simulate", summaries.error());
  if (timeline.is_open() && !timeline.flush()) {
    return PrintError("simulate",
                      InvalidInput("--timeline", "writing '" + f.timeline + "' failed"));
  }

  report::SimulateReport rep;
  rep.trace = f.trace;
  rep.torch_version = *version;
  rep.capacity_bytes = options.simulators[0].capacity_bytes;
  rep.non_pytorch_bytes = options.simulators[0].non_pytorch_bytes;
  bool any_oom = false;
  for (std::size_t k = 0; k < summaries->size(); ++k) {
    any_oom = any_oom || (*summaries)[k].ooms > 0;
    rep.runs.push_back({options.simulators[k].config, std::move((*summaries)[k])});
  }
  std::cout << (f.format == OutputFormat::kJson ? report::RenderSimulateJson(rep)
                                                : report::RenderSimulateText(rep));
  return f.fail_if_oom && any_oom ? kExitFindings : kExitOk;
}

}  // namespace memtune::cli
