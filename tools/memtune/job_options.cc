// Job options: flags -> model::JobInputs -> model::ComposeJob.
#include "job_options.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "command.h"
#include "job_script.h"
#include "memtune/core/file.h"
#include "memtune/core/units.h"
#include "memtune/model/checks.h"
#include "memtune/model/examples.h"
#include "memtune/model/job_compose.h"
#include "memtune/model/launch_script.h"

namespace memtune::cli {
namespace {

Result<std::string> ReadText(const std::string& path, const std::string& field) {
  if (path == "-") return ReadInputStream(std::cin, field, "<stdin>");
  return ReadInputFile(path, field);
}

// Flag -> document path, in the order they are applied.
void AddFlagOverrides(const JobFlags& f, std::vector<model::JobOverride>& out) {
  const std::pair<const std::string*, std::pair<const char*, const char*>> kFlags[] = {
      {&f.model, {"model.preset", "--model"}},
      {&f.tp, {"model.tensor_model_parallel_size", "--tp"}},
      {&f.pp, {"model.pipeline_model_parallel_size", "--pp"}},
      {&f.vpp, {"model.virtual_pipeline_model_parallel_size", "--vpp"}},
      {&f.cp, {"model.context_parallel_size", "--cp"}},
      {&f.ep, {"model.expert_model_parallel_size", "--ep"}},
      {&f.etp, {"model.expert_tensor_parallel_size", "--etp"}},
      {&f.seq, {"model.seq_length", "--seq"}},
      {&f.seq, {"dataset.seq_length", "--seq"}},
      {&f.mbs, {"train.micro_batch_size", "--mbs"}},
      {&f.gbs, {"train.global_batch_size", "--gbs"}},
      {&f.world_size, {"memtune.world_size", "--world-size"}},
      {&f.precision, {"mixed_precision", "--precision"}},
      {&f.recipe, {"memtune.recipe", "--recipe"}},
  };
  for (const auto& [value, target] : kFlags) {
    if (!value->empty()) out.push_back({target.first, *value, target.second});
  }
  if (f.sp) out.push_back({"model.sequence_parallel", "true", "--sp"});
  if (!f.gpu.empty()) {
    // A size ("80GiB", "85520809984") sets the capacity; anything else names a catalog GPU.
    const bool is_size = std::isdigit(static_cast<unsigned char>(f.gpu.front())) != 0;
    out.push_back({is_size ? "memtune.gpu_memory_bytes" : "memtune.gpu",
                   is_size ? "'" + f.gpu + "'" : f.gpu, "--gpu"});
  }
}

Status AddSetOverrides(const JobFlags& f, std::vector<model::JobOverride>& out) {
  for (const std::string& item : f.set) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidInput("--set", "--set '" + item + "' is not PATH=VALUE",
                          "e.g. --set model.recompute_modules=[mlp]");
    }
    out.push_back({item.substr(0, eq), item.substr(eq + 1), "--set"});
  }
  for (const std::string& item : f.env) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidInput("--env", "--env '" + item + "' is not NAME=VALUE",
                          "e.g. --env NCCL_NVLS_ENABLE=0");
    }
    // `--env 1=VALUE` is a launch script's argument ($1), not an environment variable.
    if (std::isdigit(static_cast<unsigned char>(item[0]))) continue;
    // The value as a YAML string: the launch environment holds text.
    out.push_back(
        {"memtune.env." + item.substr(0, eq), model::YamlQuoted(item.substr(eq + 1)), "--env"});
  }
  return OkStatus();
}

}  // namespace

void AddJobOptions(CLI::App& app, JobFlags& f, JobFileArg job_arg) {
  auto* file =
      app.add_option(job_arg == JobFileArg::kPositional ? "JOB" : "--job", f.job_file,
                     "Job document (YAML or JSON) or bash launch script ('-' reads stdin)");
  auto* example =
      app.add_option("--example", f.example, "Built-in example job")->option_text("NAME");
  file->excludes(example);
  app.add_option("--model", f.model, "Model preset from the catalog (model.preset)")
      ->option_text("PRESET");
  const std::pair<const char*, std::string*> kSizes[] = {{"--tp", &f.tp},   {"--pp", &f.pp},
                                                         {"--vpp", &f.vpp}, {"--cp", &f.cp},
                                                         {"--ep", &f.ep},   {"--etp", &f.etp}};
  const char* kSizeHelp[] = {"Tensor",  "Pipeline", "Virtual pipeline",
                             "Context", "Expert",   "Expert tensor"};
  for (std::size_t i = 0; i < std::size(kSizes); ++i) {
    app.add_option(kSizes[i].first, *kSizes[i].second, std::string(kSizeHelp[i]) + "-parallel size")
        ->option_text("N");
  }
  app.add_flag("--sp", f.sp, "Sequence parallelism on");
  app.add_option("--seq", f.seq, "Sequence length (model and dataset)")->option_text("TOKENS");
  app.add_option("--mbs", f.mbs, "Micro-batch size")->option_text("N");
  app.add_option("--gbs", f.gbs, "Global batch size")->option_text("N");
  app.add_option("--world-size,--gpus,--num-gpus", f.world_size, "Number of GPUs")
      ->option_text("N");
  app.add_option("--precision", f.precision,
                 "Bridge mixed-precision preset (mixed_precision), e.g. bf16_mixed, "
                 "bf16_with_fp8_current_scaling_mixed")
      ->option_text("PRESET");
  app.add_option("--recipe", f.recipe,
                 "A Megatron-Bridge recipe to start from (memtune.recipe), e.g. "
                 "llama3_70b_sft_32gpu_h100_fp8cs_config; the job's fields apply on top")
      ->option_text("NAME");
  app.add_option("--hf-config", f.hf_config,
                 "A Hugging Face config.json for the architecture (model.hf_config)")
      ->option_text("FILE");
  app.add_option("--gpu", f.gpu, "GPU catalog name, or a capacity such as 80GiB")
      ->option_text("NAME|SIZE");
  app.add_option("--set", f.set, "Set any field, value as YAML (repeatable)")
      ->option_text("PATH=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--env", f.env,
                 "Set a launch environment variable (memtune.env) and a launch script's "
                 "variable, e.g. NCCL_NVLS_ENABLE=0 (repeatable)")
      ->option_text("NAME=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  auto* args = app.add_option("--megatron-args", f.megatron_args, "A Megatron-LM launch command")
                   ->option_text("\"...\"");
  auto* args_file = app.add_option("--megatron-args-file", f.megatron_args_file,
                                   "A Megatron-LM launch command or bash launch script")
                        ->option_text("FILE");
  args->excludes(args_file);
  app.add_flag("--verbose", f.verbose, "Also list the defaults used and the fields ignored");
}

namespace {

// A JOB file that is a launch script, and --megatron-args-file (a script, or a bare
// command line without `$`), go through the launch-script reader.
Status LoadCommand(const JobFlags& f, model::JobInputs& inputs, std::vector<std::string>& notes) {
  const bool job_is_script = model::LooksLikeLaunchScript(inputs.document);
  if (job_is_script && (!f.megatron_args.empty() || !f.megatron_args_file.empty())) {
    return InvalidInput(f.megatron_args.empty() ? "--megatron-args-file" : "--megatron-args",
                        "JOB " + f.job_file + " is a launch script, which gives the command",
                        "pass one of them");
  }
  if (job_is_script) {
    const std::string text = std::move(inputs.document);
    inputs.document.clear();
    return ReadScriptInput(text, f.job_file, f.env, inputs, notes);
  }
  inputs.megatron_args = f.megatron_args;
  if (f.megatron_args_file.empty()) return OkStatus();
  MEMTUNE_TRY(const std::string text, ReadText(f.megatron_args_file, "--megatron-args-file"));
  if (!model::LooksLikeLaunchScript(text) && text.find('$') == std::string::npos) {
    inputs.megatron_args = text;
    return OkStatus();
  }
  return ReadScriptInput(text, f.megatron_args_file, f.env, inputs, notes);
}

}  // namespace

bool NamesJob(const JobFlags& f) {
  return !f.job_file.empty() || !f.example.empty() || !f.model.empty() ||
         !f.megatron_args.empty() || !f.megatron_args_file.empty();
}

Result<model::JobDocument> LoadJob(const JobFlags& f) {
  model::JobInputs inputs;
  model::ParseOptions options;
  if (!f.job_file.empty()) {
    MEMTUNE_TRY(inputs.document, ReadText(f.job_file, "JOB"));
    options.source_name = f.job_file;
    options.base_dir = std::filesystem::path(f.job_file).parent_path().string();
    // A Hugging Face config.json given as the job: its architecture, as --hf-config reads it.
    if (f.job_file != "-" && model::LooksLikeHfConfig(inputs.document)) {
      // Named relative to the job's folder (options.base_dir), as a document would name it.
      inputs.document =
          model::HfConfigJobDocument(std::filesystem::path(f.job_file).filename().string());
    }
  } else if (!f.example.empty()) {
    MEMTUNE_TRY(inputs.document, model::ExampleJobYaml(f.example));
    options.source_name = "example " + f.example;
  }
  std::vector<std::string> notes;
  MEMTUNE_RETURN_IF_ERROR(LoadCommand(f, inputs, notes));
  if (!f.hf_config.empty()) {
    // Relative to the working directory: absolute only when a job file moves the base.
    const std::string path =
        options.base_dir.empty() ? f.hf_config : std::filesystem::absolute(f.hf_config).string();
    inputs.overrides.push_back({"model.hf_config", model::YamlQuoted(path), "--hf-config"});
  }
  AddFlagOverrides(f, inputs.overrides);
  MEMTUNE_RETURN_IF_ERROR(AddSetOverrides(f, inputs.overrides));
  MEMTUNE_TRY(model::JobDocument doc, model::ComposeJob(inputs, options));
  doc.warnings.insert(doc.warnings.begin(), notes.begin(), notes.end());
  return doc;
}

void PrintJobNotes(std::string_view command, const model::JobDocument& doc, bool verbose) {
  for (const std::string& warning : doc.warnings) PrintWarning(command, warning);
  if (command != "check" && command != "job") {
    // Errors that leave every memory figure as it is do not block; the result says so.
    for (const model::Finding& f : model::MemoryNeutralErrors(doc.job)) {
      PrintWarning(command, "error[" + f.rule_id + "] " + f.message +
                                " (the job fails upstream; this does not change the memory "
                                "figure, which follows)");
    }
  }
  if (!verbose) return;
  for (const std::string& line : doc.defaults_used) {
    std::cerr << "memtune " << command << ": default: " << line << "\n";
  }
  for (const std::string& path : doc.ignored_fields) {
    std::cerr << "memtune " << command << ": ignored: " << path << "\n";
  }
}

}  // namespace memtune::cli
