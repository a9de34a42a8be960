// memtune calibrate: runs the GPU calibration harness (tools/calibrate/run.py) as a
// subprocess, then validates its cases (assess::Validate) and replays its snapshots
// (snapshot::Replay) through the library, and prints the comparison. CLI-only: the library
// never spawns.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "commands.h"
#include "memtune/assess/validate.h"
#include "memtune/core/file.h"
#include "memtune/report/estimate_report.h"
#include "memtune/report/replay_report.h"
#include "memtune/snapshot/replay.h"

extern char** environ;

namespace memtune::cli {
namespace {

namespace fs = std::filesystem;
constexpr const char* kCommand = "calibrate";
constexpr int kSignalExitBase = 128;  // shell convention for "killed by signal N"

struct CalibrateOptions {
  bool dry_run = false;
  std::string out = "calibrate-out";
  std::string only;
  std::string python = "python3";
  std::string harness;
};

struct ProcessResult {
  int exit_code = 0;
  std::string stdout_text;  // only when captured
};

// Runs argv[0] (searched in PATH) and waits. With `capture`, stdout is returned and stderr
// discarded; otherwise both go to this process's streams.
Result<ProcessResult> RunProcess(const std::vector<std::string>& args, bool capture) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int pipe_fds[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (capture) {
    if (pipe(pipe_fds) != 0) return InvalidInput("", std::string("pipe: ") + strerror(errno));
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  std::cout.flush();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ProcessResult result;
  if (capture) {
    close(pipe_fds[1]);
    char buffer[4096];
    ssize_t n = 0;
    while (rc == 0 && (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0) {
      result.stdout_text.append(buffer, static_cast<size_t>(n));
    }
    close(pipe_fds[0]);
  }
  if (rc != 0) return InvalidInput("", "cannot run '" + args[0] + "': " + strerror(rc));
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : kSignalExitBase + WTERMSIG(status);
  return result;
}

std::string SelfExecutable() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("memtune") : self.string();
}

// The harness folder: --harness, else tools/calibrate found next to the executable (build
// folder inside the source tree, or an installed share/memtune/calibrate).
Result<fs::path> FindHarness(const CalibrateOptions& options) {
  if (!options.harness.empty()) {
    if (fs::exists(fs::path(options.harness) / "run.py")) return fs::path(options.harness);
    return InvalidInput("--harness", "no run.py in '" + options.harness + "'",
                        "pass the tools/calibrate folder of the memtune sources");
  }
  const fs::path bin = fs::path(SelfExecutable()).parent_path();
  for (const char* rel :
       {"../tools/calibrate", "../../tools/calibrate", "../share/memtune/calibrate"}) {
    if (fs::exists(bin / rel / "run.py")) return (bin / rel).lexically_normal();
  }
  return InvalidInput("--harness",
                      "cannot find tools/calibrate/run.py next to the memtune executable",
                      "pass --harness DIR (the tools/calibrate folder of the memtune sources)");
}

// Asks the interpreter whether PyTorch with CUDA is there (run.py --probe prints JSON).
Result<nlohmann::json> Probe(const CalibrateOptions& options, const fs::path& harness) {
  auto proc = RunProcess({options.python, (harness / "run.py").string(), "--probe"}, true);
  if (!proc) {
    return InvalidInput("--python", proc.error().message,
                        "point --python at a Python 3 interpreter");
  }
  auto info = nlohmann::json::parse(proc->stdout_text, nullptr, false);
  if (proc->exit_code != 0 || info.is_discarded() || !info.is_object()) {
    return InvalidInput("--python",
                        "'" + options.python + "' did not answer the harness probe (exit " +
                            std::to_string(proc->exit_code) + ")",
                        "point --python at a Python 3 interpreter");
  }
  if (info.value("torch", nlohmann::json()).is_null()) {
    return InvalidInput("--python", "PyTorch is not installed for '" + options.python + "'",
                        "install PyTorch or point --python at an interpreter that has it");
  }
  if (!options.dry_run && !info.value("cuda", false)) {
    return InvalidInput("",
                        "no GPU found: PyTorch " + info.value("torch", std::string("?")) +
                            " under '" + options.python + "' reports no CUDA device",
                        "run 'memtune calibrate --dry-run' to exercise the harness on the CPU "
                        "with small shapes");
  }
  return info;
}

// The first interpreter whose probe reports PyTorch, or the first candidate when none does
// (Probe then explains what is missing).
std::string ChooseInterpreter(const fs::path& harness, const std::vector<std::string>& candidates) {
  for (const std::string& python : candidates) {
    auto proc = RunProcess({python, (harness / "run.py").string(), "--probe"}, true);
    if (!proc || proc->exit_code != 0) continue;
    auto info = nlohmann::json::parse(proc->stdout_text, nullptr, false);
    if (info.is_object() && !info.value("torch", nlohmann::json()).is_null()) return python;
  }
  return candidates.front();
}

// Prints the measured peaks recorded for a snapshot's run, next to its replay.
void PrintMeasured(const fs::path& out, const fs::path& snapshot) {
  std::string stem = snapshot.filename().string();
  stem = stem.substr(0, stem.find(".pickle"));
  std::ifstream in(out / "results" / (stem + ".json"));
  auto result = nlohmann::json::parse(in, nullptr, false);
  if (result.is_discarded()) return;
  std::cout << "measured for " << stem << ": max_allocated "
            << result.value("max_allocated", int64_t{0}) << " B, max_reserved "
            << result.value("max_reserved", int64_t{0}) << " B\n";
}

// The harness's cases predicted and compared (memtune validate's report). Returns an exit code.
int ValidateCases(const fs::path& cases) {
  std::cout << "\n== memtune validate " << cases.string() << "\n";
  auto text = ReadInputFile(cases.string(), "cases");
  if (!text) return PrintError(kCommand, text.error());
  auto parsed = assess::ParseValidationCases(*text, cases.string());
  if (!parsed) return PrintError(kCommand, parsed.error());
  std::cout << report::RenderValidateText(assess::Validate(*parsed, {}));
  return kExitOk;
}

// One snapshot replayed under its recorded settings (memtune replay's report). Returns an
// exit code: kExitFindings when the simulator diverges from the recording.
int ReplaySnapshot(const fs::path& out, const fs::path& snapshot) {
  std::cout << "\n== memtune replay " << snapshot.string() << "\n";
  PrintMeasured(out, snapshot);
  auto snap = snapshot::LoadSnapshotFile(snapshot.string());
  if (!snap) return PrintError(kCommand, snap.error());
  auto replayed = snapshot::Replay(*snap, {});
  if (!replayed) return PrintError(kCommand, replayed.error());
  std::cout << report::RenderReplayText(*replayed);
  for (const auto& d : replayed->devices) {
    if (d.divergence) return kExitFindings;
  }
  return kExitOk;
}

// validate on the cases, replay on every snapshot; returns the worst exit code.
int Compare(const CalibrateOptions& options) {
  const fs::path out(options.out);
  int worst = ValidateCases(out / "cases.jsonl");
  std::vector<fs::path> snapshots;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out / "snapshots", ec)) {
    if (entry.path().string().ends_with(".pickle.gz")) snapshots.push_back(entry.path());
  }
  std::sort(snapshots.begin(), snapshots.end());
  for (const fs::path& snapshot : snapshots) {
    worst = std::max(worst, ReplaySnapshot(out, snapshot));
  }
  if (snapshots.empty()) std::cout << "\n(no snapshots to replay)\n";
  return worst;
}

}  // namespace

int RunCalibrate(int argc, char** argv) {
  CLI::App app(
      "Measure training workloads that allocate like one Megatron rank (native and expandable "
      "allocator), then compare memtune's predictions (validate) and allocator replay with "
      "the measurements. Needs PyTorch with CUDA, or --dry-run (CPU, small shapes).",
      "memtune calibrate");
  app.footer(
      "Example:\n  memtune calibrate --out calib-h200\n  memtune calibrate --dry-run --only "
      "dense-h4k-s4k");
  CalibrateOptions options;
  app.add_flag("--dry-run", options.dry_run, "run every workload on the CPU with small shapes");
  app.add_option("--out", options.out, "output folder (default: calibrate-out)");
  app.add_option("--only", options.only, "comma-separated workload names (default: all)");
  app.add_option(
      "--python", options.python,
      "Python interpreter with PyTorch (default: python3 on PATH, then /usr/bin/python3)");
  app.add_option("--harness", options.harness,
                 "the tools/calibrate folder (default: found next to "
                 "the executable)");
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;
  auto harness = FindHarness(options);
  if (!harness) return PrintError(kCommand, harness.error());
  if (app.count("--python") == 0) {
    // Without --python: the first python3 on PATH (a virtualenv, pyenv) may lack PyTorch
    // while Debian's own /usr/bin/python3 has it (python3-torch); use that one then.
    options.python = ChooseInterpreter(*harness, {"python3", "/usr/bin/python3"});
  }
  auto info = Probe(options, *harness);
  if (!info) return PrintError(kCommand, info.error());
  std::vector<std::string> run = {options.python, (*harness / "run.py").string(), "--out",
                                  options.out};
  if (options.dry_run) run.push_back("--dry-run");
  if (!options.only.empty()) run.insert(run.end(), {"--only", options.only});
  auto proc = RunProcess(run, false);
  if (!proc) return PrintError(kCommand, proc.error());
  if (proc->exit_code == kExitUsage) return kExitUsage;  // run.py printed the error
  if (proc->exit_code != kExitOk && proc->exit_code != kExitFindings) {
    std::cerr << "memtune calibrate: error: the harness failed (exit " << proc->exit_code << ")\n";
    return kExitInternal;
  }
  const int compare = Compare(options);
  const int compared = compare == kExitOk ? kExitOk : kExitFindings;
  return std::max(proc->exit_code, compared);
}

}  // namespace memtune::cli
