// Launch-script command finder: which expanded command trains, and the GPU counts its
// launcher gives (torchrun, python -m torch.distributed.run, deepspeed, srun, #SBATCH).
#include <algorithm>
#include <cctype>

#include "model/launch_script_internal.h"

namespace memtune::model::script {
namespace {

enum class Kind { kNone, kNodes, kProcs, kGpus };

// Count flags of torchrun (torch/distributed/run.py), deepspeed (deepspeed/launcher/
// runner.py) and Slurm's srun/sbatch.
Kind FlagKind(std::string_view name) {
  static constexpr std::pair<std::string_view, Kind> kFlags[] = {
      {"--nnodes", Kind::kNodes},
      {"--num_nodes", Kind::kNodes},
      {"--num-nodes", Kind::kNodes},
      {"--nodes", Kind::kNodes},
      {"-N", Kind::kNodes},
      {"--nproc_per_node", Kind::kProcs},
      {"--nproc-per-node", Kind::kProcs},
      {"--num_gpus", Kind::kProcs},
      {"--num-gpus", Kind::kProcs},
      {"--ntasks-per-node", Kind::kProcs},
      {"--gpus-per-node", Kind::kGpus},
      {"--gres", Kind::kGpus},
  };
  for (const auto& [flag, kind] : kFlags) {
    if (name == flag) return kind;
  }
  return Kind::kNone;
}

// "8" -> 8; "1:4" (elastic range) -> 4; "gpu:h100:8" -> 8; anything else -> nullopt.
std::optional<int> CountValue(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  const std::string last = colon == std::string::npos ? text : text.substr(colon + 1);
  if (last.empty() || last.size() > 6 || !std::all_of(last.begin(), last.end(), ::isdigit)) {
    return std::nullopt;
  }
  return std::stoi(last);
}

std::string Basename(const std::string& word) {
  const std::size_t slash = word.rfind('/');
  return slash == std::string::npos ? word : word.substr(slash + 1);
}

// "python", "python3", "python3.11": not "python_script:".
bool IsPython(const std::string& name) {
  return name.rfind("python", 0) == 0 && std::all_of(name.begin() + 6, name.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
         });
}

bool IsLauncher(const std::string& word) {
  const std::string name = Basename(word);
  return name == "torchrun" || name == "deepspeed" || name == "srun" || IsPython(name);
}

bool IsPythonScript(const std::string& word) {
  return word.size() > 3 && word[0] != '-' && word.ends_with(".py");
}

}  // namespace

std::vector<std::size_t> ReadCounts(const std::vector<std::string>& words, Counts& counts) {
  std::vector<std::size_t> used;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    const std::size_t eq = word.find('=');
    std::string name = word.substr(0, eq);
    std::string value;
    bool joined = eq != std::string::npos;
    if (joined) value = word.substr(eq + 1);
    if (word.size() > 2 && word.rfind("-N", 0) == 0 && word[2] != '=') {
      name = "-N", value = word.substr(2), joined = true;  // "-N2"
    }
    const Kind kind = FlagKind(name);
    if (kind == Kind::kNone) continue;
    used.push_back(i);
    if (!joined && i + 1 < words.size()) used.push_back(i + 1), value = words[++i];
    const std::optional<int> count = CountValue(value);
    if (!count) continue;
    (kind == Kind::kNodes   ? counts.nodes
     : kind == Kind::kProcs ? counts.procs
                            : counts.gpus) = count;
  }
  return used;
}

std::optional<std::size_t> FindTrainingScript(const std::vector<std::string>& fields) {
  // Commands that only print or test words are never the run.
  static constexpr std::string_view kNotRuns[] = {"echo", "printf", "cat",   ":",     "test",
                                                  "[",    "[[",     "local", "export"};
  if (fields.empty() ||
      std::find(std::begin(kNotRuns), std::end(kNotRuns), fields[0]) != std::end(kNotRuns)) {
    return std::nullopt;
  }
  // The launcher may follow a wrapper (`nsys profile ...`, `uv run`, `numactl ...`).
  std::size_t i = 0;
  while (i < fields.size() && !IsLauncher(fields[i]) && !IsPythonScript(fields[i])) ++i;
  if (i >= fields.size() || !IsLauncher(fields[i])) return std::nullopt;
  for (++i; i < fields.size(); ++i) {
    if (!IsPythonScript(fields[i])) continue;
    const bool pretrain = Basename(fields[i]).rfind("pretrain_", 0) == 0;
    const bool flags = i + 1 < fields.size() && fields[i + 1].rfind("--", 0) == 0;
    if (pretrain || flags) return i;
  }
  return std::nullopt;
}

std::string QuoteWords(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) {
    if (!out.empty()) out.push_back(' ');
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) ||
             std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
    });
    if (plain) {
      out += word;
      continue;
    }
    out.push_back('\'');
    for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out.push_back('\'');
  }
  return out;
}

}  // namespace memtune::model::script

namespace memtune::model {
namespace {

// "NAME=value" or "NAME=(" at the start of a line: a shell assignment, never YAML or JSON.
bool IsShellAssignment(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_'))
    ++i;
  return i > 0 && i < line.size() && line[i] == '=' &&
         !std::isdigit(static_cast<unsigned char>(line[0]));
}

}  // namespace

bool LooksLikeLaunchScript(std::string_view text) {
  if (text.rfind("#!", 0) == 0) return true;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("#SBATCH", 0) == 0 || line.rfind("export ", 0) == 0) return true;
    if (IsShellAssignment(line)) return true;
    const std::string name =
        script::Basename(std::string(line.substr(0, std::min(line.find(' '), line.size()))));
    if (name == "torchrun" || name == "deepspeed" || name == "srun") return true;
    if (script::IsPython(name) && line.find(".py") != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace memtune::model
