// Job-level rules: the job the file describes (model::ComposeJob, the one job parser), every
// `memtune check` finding mapped back to the line of its flag, and with --estimate the
// predicted verdict per allocator mode (assess::AssessJob).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "lint/lint_internal.h"
#include "memtune/assess/assess.h"
#include "memtune/model/checks.h"
#include "memtune/model/job_compose.h"
#include "memtune/model/recipes.h"

namespace memtune::lint {
namespace {

// `model.tensor_model_parallel_size=8`, `+ddp.nccl_ub=true`: a Bridge / Hydra dotted
// override on the command line -> its path, or "" for any other word.
std::string DottedPath(const std::string& word) {
  const std::size_t eq = word.find('=');
  const std::size_t start = word.starts_with("+") ? 1 : 0;
  if (eq == std::string::npos || eq <= start) return "";
  const std::string path = word.substr(start, eq - start);
  if (path.find('.') == std::string::npos || path.front() == '.' || path.back() == '.') return "";
  for (char ch : path) {
    if (!std::islower(static_cast<unsigned char>(ch)) &&
        !std::isdigit(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.') {
      return "";
    }
  }
  return path;
}

// `--config-file FILE.yaml` (Bridge's run_recipe / NeMo launchers): the override YAML,
// read next to the script, becomes the job document the flags and overrides go on top of.
void ConfigFile(Context& c, std::size_t k, model::JobInputs& in) {
  const std::vector<model::ScriptWord>& words = c.script.words;
  const std::string& name = words[k + 1].text;
  if (!name.ends_with(".yaml") && !name.ends_with(".yml")) return;
  const std::filesystem::path file(name);
  const std::filesystem::path dir = std::filesystem::path(c.file).parent_path();
  const std::string full = file.is_absolute() ? name : (dir / file).string();
  Result<std::string> text = (*c.read)(full);
  if (!text || text->size() > kMaxLintFileBytes || text->find('\0') != std::string::npos) {
    c.notes->push_back(c.file + ": " + words[k].text + " " + name + " not read" +
                       (text ? "" : ": " + text.error().Describe()));
    return;
  }
  in.document = *text;
  c.config_file = name;
  c.config_text = std::move(*text);
}

model::JobInputs ScriptInputs(Context& c) {
  model::JobInputs in;
  in.megatron_args = c.script.command;
  for (const auto& [name, value] : c.env) {
    in.overrides.push_back({"memtune.env." + name, model::YamlQuoted(value), "script"});
  }
  if (c.script.nproc_per_node) {
    const int world = *c.script.nproc_per_node * c.script.nnodes.value_or(1);
    in.overrides.push_back({"memtune.world_size", std::to_string(world), "launcher"});
    in.overrides.push_back(
        {"memtune.gpus_per_node", std::to_string(*c.script.nproc_per_node), "launcher"});
  }
  const std::vector<model::ScriptWord>& words = c.script.words;
  for (std::size_t k = 0; k + 1 < words.size(); ++k) {
    // Bridge's run_recipe.py --recipe NAME: the recipe memtune knows by that name.
    if (words[k].text == "--recipe" && model::RecipeJobYaml(words[k + 1].text)) {
      in.overrides.push_back({"memtune.recipe", words[k + 1].text, "--recipe"});
    }
    if (words[k].text == "--config-file" || words[k].text == "--config") ConfigFile(c, k, in);
  }
  const bool bridge = !in.document.empty() || std::any_of(in.overrides.begin(), in.overrides.end(),
                                                          [](const model::JobOverride& o) {
                                                            return o.path == "memtune.recipe";
                                                          });
  if (bridge) in.megatron_args.clear();  // a Bridge entry point: its flags are not Megatron's
  for (const model::ScriptWord& w : words) {
    const std::string path = DottedPath(w.text);
    if (path.empty()) continue;
    in.overrides.push_back(
        {path, w.text.substr(w.text.find('=') + 1), "line " + std::to_string(w.at.line)});
  }
  return in;
}

std::string Gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

}  // namespace

void BuildJob(Context& c) {
  c.torch_version = c.options->torch_version.value_or(alloc::kDefaultTorchVersion);
  model::JobInputs in;
  if (c.is_script) {
    if (c.script.command_at.line == 0) return;
    if (!c.script.unresolved.empty()) {
      std::string names;
      for (const model::UnresolvedVariable& u : c.script.unresolved) {
        names += (names.empty() ? "$" : ", $") + u.name + " (line " + std::to_string(u.line) + ")";
      }
      c.Add(MakeFinding(kRuleJobNotBuilt, CommandPlace(c),
                        "the training command uses variables the script never sets: " + names +
                            "; the check rules did not run"));
      return;
    }
    in = ScriptInputs(c);
  } else {
    in.document = std::string(c.text);
  }
  if (!c.options->gpu.empty()) in.overrides.push_back({"memtune.gpu", c.options->gpu, "--gpu"});
  model::ParseOptions parse;
  parse.source_name = c.file;
  Result<model::JobDocument> doc = model::ComposeJob(in, parse);
  if (!doc) {
    c.Add(MakeFinding(
        kRuleJobNotBuilt, CommandPlace(c),
        "the job could not be built: " + doc.error().Describe() + "; the check rules did not run"));
    return;
  }
  c.job = std::move(*doc);
  if (c.is_script) return;
  c.env = c.job->job.memtune.env;
  const std::string& named = c.job->job.memtune.versions.torch;
  if (!c.options->torch_version && !named.empty()) {
    // The job's schema validated the spelling; a release the allocator rules do not know
    // leaves the default, said in a note.
    Result<alloc::TorchVersion> v = alloc::ParseTorchVersion(named, "memtune.versions.torch");
    if (v) {
      c.torch_version = *v;
    } else {
      c.notes->push_back(c.file + ": " + v.error().Describe() + "; linted as PyTorch " +
                         c.torch_version.ToString());
    }
  }
}

void CheckRules(const Context& c) {
  if (!c.job) return;
  for (const model::Finding& f : model::CheckJob(c.job->job)) {
    if (f.rule_id == kSkippedCheckRule) continue;
    std::optional<Place> place;
    for (int pass = 0; pass < 2 && !place; ++pass) {  // flags first, then env entries
      for (const auto& [path, value] : f.fields) {
        if (path.starts_with("memtune.env.") != (pass == 1)) continue;
        place = FieldPlace(c, path);
        if (place) break;
      }
    }
    std::string values;
    for (const auto& [path, value] : f.fields) {
      values += (values.empty() ? " (" : ", ") + path + " = " + value;
    }
    if (!values.empty()) values += ")";
    c.Add(MakeFinding("check." + f.rule_id, place ? *place : CommandPlace(c), f.message + values,
                      f.fix));
  }
}

void EstimateRules(const Context& c) {
  if (!c.options->estimate || !c.job) return;
  assess::AssessOptions options;
  options.torch_version = c.torch_version;
  Result<assess::Assessment> a = assess::AssessJob(c.job->job, options);
  if (!a) {
    c.notes->push_back(c.file + ": --estimate not run: " + a.error().Describe());
    return;
  }
  if (a->verdicts.empty()) {
    c.notes->push_back(
        c.file + ": --estimate gave no verdict: " +
        (c.job->job.memtune.gpu.empty() ? std::string("no GPU (give --gpu)") : a->forecast_note));
  }
  for (const assess::ModeVerdict& v : a->verdicts) {
    if (v.state == assess::VerdictState::kFits) continue;
    const std::string mode(assess::AllocatorModeName(v.mode));
    const std::string conf = v.alloc_conf.empty() ? "PyTorch's defaults" : v.alloc_conf;
    Place place = CommandPlace(c);
    if (v.state == assess::VerdictState::kOom) {
      Finding f = MakeFinding(kRuleOom, place,
                              "predicted OOM on pipeline rank " + std::to_string(v.pp_rank) +
                                  " with the " + mode + " allocator (" + conf + ")" +
                                  (v.job_config ? ", the job's own setting" : "") + ": it needs " +
                                  Gib(-v.margin_bytes) + " more" +
                                  (v.moment.empty() ? "" : ", at " + v.moment));
      if (!v.job_config) f.severity = Severity::kWarning;
      c.Add(std::move(f));
    } else {
      c.Add(MakeFinding(kRuleAtRisk, place,
                        "pipeline rank " + std::to_string(v.pp_rank) + " fits with the " + mode +
                            " allocator by " + Gib(v.margin_bytes) + ", within the prediction's " +
                            "uncertainty of " + Gib(v.uncertainty_bytes)));
    }
  }
}

}  // namespace memtune::lint
