// memtune report: one self-contained HTML page (or its JSON data) for a job, a snapshot or
// an OOM message/log. The library builds the page (memtune/report/html_report.h).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "commands.h"
#include "job_options.h"
#include "memtune/core/file.h"
#include "memtune/model/job_summary.h"
#include "memtune/report/html_report.h"
#include "memtune/snapshot/snapshot.h"

namespace memtune::cli {
namespace {

struct ReportFlags {
  std::string input;   // INPUT: job document, snapshot or OOM message/log
  std::string output;  // -o FILE ("" or "-": stdout)
  std::string format = "html";
  int iterations = 2;
  std::string torch_version = alloc::kDefaultTorchVersion.ToString();
  bool no_plan = false;
  JobFlags job;
};

bool EndsWith(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsJobFileName(const std::string& path) {
  return EndsWith(path, ".yaml") || EndsWith(path, ".yml") || EndsWith(path, ".json");
}

Result<std::string> JobData(ReportFlags& f, alloc::TorchVersion version) {
  if (!f.input.empty()) f.job.job_file = f.input;
  MEMTUNE_TRY(const model::JobDocument doc, LoadJob(f.job));
  PrintJobNotes("report", doc, f.job.verbose);
  report::JobReportInput in;
  in.job = &doc.job;
  in.options.iterations = f.iterations;
  in.options.torch_version = version;
  MEMTUNE_TRY(const assess::Assessment assessment, assess::AssessJob(doc.job, in.options));
  in.assessment = &assessment;
  in.context = {f.job.job_file.empty() ? f.job.example : f.job.job_file, doc.job.memtune.gpu,
                doc.defaults_used, model::DescribePrecision(doc),
                model::DescribeParameters(doc.job)};
  std::optional<plan::Plan> plan;
  if (!f.no_plan) {
    plan::PlanOptions po;
    po.iterations = f.iterations;
    auto planned = plan::PlanJob(doc.job, po);
    // A job the planner cannot rank (no step-time model for its GPU) still gets a report.
    if (planned) plan = std::move(*planned);
    if (!planned) PrintWarning("report", "no plan: " + planned.error().message);
  }
  in.plan = plan ? &*plan : nullptr;
  return report::RenderJobReportData(in);
}

Result<std::string> InputData(ReportFlags& f, alloc::TorchVersion version) {
  if (f.input.empty() || IsJobFileName(f.input)) {
    if (!f.input.empty() && !f.job.job_file.empty()) {
      return InvalidInput("--job", "INPUT is a job already; give one of INPUT and --job");
    }
    return JobData(f, version);
  }
  MEMTUNE_TRY(std::string bytes, ReadInputFile(f.input, "INPUT"));
  if (snapshot::IsGzip(bytes) || (!bytes.empty() && bytes[0] == '\x80')) {
    MEMTUNE_TRY(const snapshot::Snapshot snap, snapshot::LoadSnapshot(std::move(bytes)));
    return report::RenderSnapshotReportData(snap, f.input, version);
  }
  diagnose::DiagnoseOptions options;
  options.torch_version = version;
  if (NamesJob(f.job)) {
    MEMTUNE_TRY(const model::JobDocument doc, LoadJob(f.job));
    options.job = doc.job;
  }
  MEMTUNE_TRY(auto input, diagnose::ReadDiagnoseInput(f.input, std::move(bytes)));
  MEMTUNE_TRY(const diagnose::Diagnosis d, diagnose::Diagnose({input}, options));
  return report::RenderDiagnosisReportData(d, f.input);
}

int Write(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return kExitOk;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return PrintError("report", NotFound("-o", "cannot write '" + path + "'"));
  return kExitOk;
}

void AddReportOptions(CLI::App& app, ReportFlags& f) {
  app.add_option("INPUT", f.input,
                 "job document (.yaml, .yml, .json), snapshot pickle (optionally gzip'd) or OOM "
                 "message/log (anything else); none: the job the job options name");
  app.add_option("-o,--output", f.output, "file to write (default: stdout)")->option_text("FILE");
  app.add_option("--format", f.format, "html (default): the page; json: the data it embeds")
      ->check(CLI::IsMember({"html", "json"}))
      ->option_text("html|json");
  app.add_option("--iterations", f.iterations,
                 "training iterations to synthesize and simulate (default 2)")
      ->check(CLI::Range(1, 100))
      ->option_text("N");
  app.add_option("--torch-version", f.torch_version,
                 "PyTorch release whose allocator rules apply: 2.1 to 2.10 or main (default: 2.9)");
  app.add_flag("--no-plan", f.no_plan, "leave the plan out (it runs the planner, ~1 s)");
  AddJobOptions(app, f.job, JobFileArg::kOption);
}

}  // namespace

int RunReport(int argc, char** argv) {
  CLI::App app(
      "Write one self-contained HTML report (styles, scripts and data inline; it opens offline) "
      "of a job (the estimate per rank against capacity, the verdict per allocator mode, the "
      "allocator timeline and segment map of the deciding rank, the plan), of a memory "
      "snapshot (its recorded timeline and segments, a replay under the other segment mode) "
      "or of an OOM message or log (the diagnosis).",
      "memtune report");
  app.footer(
      "Example:\n  memtune report --example llama3-70b-32xh100 -o report.html\n  memtune report "
      "job.yaml -o job.html\n  memtune report snapshot.pickle -o snapshot.html\n  memtune "
      "report oom.txt --job job.yaml -o oom.html");
  ReportFlags flags;
  AddReportOptions(app, flags);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;
  if (flags.input.empty() && !NamesJob(flags.job)) {
    return PrintError("report", InvalidInput("INPUT", "name a job, a snapshot or an OOM log",
                                             "e.g. memtune report --example llama3-70b-32xh100"));
  }
  if (flags.format == "html" && !report::HtmlFrontEndAvailable()) {
    return PrintError("report", report::RenderHtmlReport("", "").error());
  }
  auto version = alloc::ParseTorchVersion(flags.torch_version, "--torch-version");
  if (!version) return PrintError("report", version.error());
  auto data = InputData(flags, *version);
  if (!data) return PrintError("report", data.error());
  // The page embeds the data compact; as output it is indented like the other JSON reports.
  if (flags.format == "json") {
    return Write(flags.output, nlohmann::ordered_json::parse(*data).dump(2) + "\n");
  }
  const std::string title =
      nlohmann::ordered_json::parse(*data).value("title", std::string("memtune report"));
  auto page = report::RenderHtmlReport(*data, title);
  if (!page) return PrintError("report", page.error());
  return Write(flags.output, *page);
}

}  // namespace memtune::cli
