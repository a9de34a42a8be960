// Launch scripts as job inputs (see job_script.h).
#include "job_script.h"

#include <filesystem>

#include "memtune/core/file.h"
#include "memtune/model/launch_script.h"

namespace memtune::cli {
namespace {

model::ScriptOptions Options(const std::string& path, const std::vector<std::string>& env) {
  model::ScriptOptions options;
  for (const std::string& item : env) {
    const std::size_t eq = item.find('=');
    if (eq != std::string::npos && eq > 0)
      options.variables[item.substr(0, eq)] = item.substr(eq + 1);
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  options.read_file = [dir](const std::string& name) -> Result<std::string> {
    const std::filesystem::path file(name);
    return ReadInputFile(file.is_absolute() ? file.string() : (dir / file).string(), "source");
  };
  return options;
}

// One line naming every unresolved variable and the flags that set them.
Error UnresolvedError(const std::string& path, const std::vector<model::UnresolvedVariable>& all) {
  std::string names, flags, substitutions;
  for (const model::UnresolvedVariable& u : all) {
    const bool substitution = u.name[0] == '$' || u.name[0] == '`';
    const std::string shown = substitution ? u.name : "$" + u.name;
    names += (names.empty() ? "" : ", ") + shown + " (line " + std::to_string(u.line) + ")";
    if (substitution) {
      substitutions += (substitutions.empty() ? "" : ", ") + u.name;
    } else {
      flags += " --env " + u.name + "=VALUE";
    }
  }
  std::string hint;
  if (!flags.empty()) hint = "set " + std::string(all.size() > 1 ? "them" : "it") + " with" + flags;
  if (!substitutions.empty()) {
    hint += (hint.empty() ? "" : "; ") + std::string("replace ") + substitutions +
            " in the script (memtune never runs commands)";
  }
  return InvalidInput(path, "the training command uses variables the script never sets: " + names,
                      hint);
}

}  // namespace

Status ReadScriptInput(const std::string& text, const std::string& path,
                       const std::vector<std::string>& env, model::JobInputs& inputs,
                       std::vector<std::string>& notes) {
  Result<model::LaunchScript> script = model::ReadLaunchScript(text, Options(path, env));
  if (!script) {
    Error error = script.error();
    error.field = error.field == "JOB" ? path : path + " " + error.field;
    return error;
  }
  if (!script->unresolved.empty()) return UnresolvedError(path, script->unresolved);
  inputs.megatron_args = script->command;
  for (const auto& [name, value] : script->env) {
    inputs.overrides.push_back({"memtune.env." + name, model::YamlQuoted(value), "script"});
  }
  if (script->nproc_per_node) {
    const int world = *script->nproc_per_node * script->nnodes.value_or(1);
    inputs.overrides.push_back({"memtune.world_size", std::to_string(world), "script"});
    inputs.overrides.push_back(
        {"memtune.gpus_per_node", std::to_string(*script->nproc_per_node), "script"});
  }
  for (const std::string& note : script->notes) notes.push_back(path + ": " + note);
  return OkStatus();
}

}  // namespace memtune::cli
