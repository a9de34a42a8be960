// memtune models: the model catalog with memtune's parameter count and the published one.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "catalog_table.h"
#include "command.h"
#include "commands.h"
#include "memtune/core/units.h"
#include "memtune/model/catalog.h"
#include "memtune/model/job_parse.h"
#include "memtune/model/parameters.h"

namespace memtune::cli {
namespace {

using nlohmann::ordered_json;

// One catalog entry with its architecture read through the job parser.
struct ModelEntry {
  model::ModelPresetInfo info;
  model::Job job;
  std::int64_t vocab = 0;
  std::int64_t params = 0;
};

Result<ModelEntry> LoadEntry(const std::string& name) {
  ModelEntry entry;
  MEMTUNE_TRY(entry.info, model::ModelPresetInfoFor(name));
  MEMTUNE_TRY(const model::JobDocument doc, model::ParseJobText("model: {preset: " + name + "}\n"));
  entry.job = doc.job;
  entry.vocab = model::PaddedVocabSize(entry.job);
  entry.params = model::CountParameters(entry.job.model, entry.vocab);
  return entry;
}

std::int64_t Sum(const std::vector<model::ParamTensor>& tensors) {
  std::int64_t total = 0;
  for (const auto& t : tensors) total += t.Total();
  return total;
}

// Parameter count of one part of the model (embedding, dense layers, ...).
struct Part {
  std::string key;          // JSON name: embedding, dense_layers, moe_layers, mtp_blocks, output
  std::string label;        // text: "dense layers (3)"
  std::int64_t layers = 0;  // layers or blocks in the part; 0 for embedding and output
  std::int64_t params = 0;
};

std::vector<Part> Parts(const ModelEntry& e) {
  const model::ModelConfig& m = e.job.model;
  const std::vector<bool> pattern = model::MoeLayerPattern(m);
  const auto moe = static_cast<std::int64_t>(std::count(
      pattern.begin(), pattern.begin() + static_cast<std::ptrdiff_t>(m.num_layers), true));
  const std::int64_t dense = m.num_layers - moe;
  const std::int64_t mtp = m.mtp_num_layers.value_or(0);
  std::vector<Part> parts = {
      {"embedding", "embedding", 0, Sum(model::EmbeddingParameters(m, e.vocab))}};
  const auto layers = [&](const char* key, const char* label, std::int64_t n, std::int64_t each) {
    if (n > 0)
      parts.push_back({key, std::string(label) + " (" + std::to_string(n) + ")", n, n * each});
  };
  layers("dense_layers", "dense layers", dense, Sum(model::TransformerLayerParameters(m, false)));
  layers("moe_layers", "MoE layers", moe, Sum(model::TransformerLayerParameters(m, true)));
  layers("mtp_blocks", "MTP blocks", mtp,
         mtp > 0 ? Sum(model::TransformerLayerParameters(m, pattern.back())) +
                       Sum(model::MtpExtraParameters(m))
                 : 0);
  parts.push_back({"output", "final norm + output", 0, Sum(model::OutputParameters(m, e.vocab))});
  return parts;
}

std::string Experts(const model::ModelConfig& m) {
  if (!m.num_moe_experts) return "-";
  return std::to_string(*m.num_moe_experts) + " (top-" + std::to_string(m.moe_router_topk) + ")";
}

ordered_json EntryJson(const ModelEntry& e) {
  const model::ModelConfig& m = e.job.model;
  ordered_json j;
  j["name"] = e.info.name;
  j["params"] = e.params;
  j["published_params"] = e.info.published_parameters;
  j["published_source"] = e.info.published_source;
  j["relation"] = e.info.relation.empty() ? ordered_json() : ordered_json(e.info.relation);
  j["num_layers"] = m.num_layers;
  j["hidden_size"] = m.hidden_size;
  j["num_moe_experts"] = m.num_moe_experts ? ordered_json(*m.num_moe_experts) : ordered_json();
  j["moe_router_topk"] = m.num_moe_experts ? ordered_json(m.moe_router_topk) : ordered_json();
  j["mtp_num_layers"] = m.mtp_num_layers ? ordered_json(*m.mtp_num_layers) : ordered_json();
  j["vocab_size"] = e.vocab;
  j["source"] = e.info.source;
  return j;
}

void PrintList(const std::vector<ModelEntry>& entries) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "PARAMS", "PUBLISHED", "LAYERS", "HIDDEN", "EXPERTS", "SOURCE"}};
  for (const ModelEntry& e : entries) {
    rows.push_back({e.info.name, FormatWithCommas(e.params),
                    FormatWithCommas(e.info.published_parameters) +
                        (e.params == e.info.published_parameters ? "" : "*"),
                    std::to_string(e.job.model.num_layers), std::to_string(e.job.model.hidden_size),
                    Experts(e.job.model), e.info.source});
  }
  std::cout << RenderTable(rows, {false, true, true, true, true, false, false})
            << "\nPARAMS: memtune's count of a Megatron-Core model (TP 1). "
               "*: differs from the published count; see 'memtune models NAME'.\n";
}

void PrintDetail(const ModelEntry& e) {
  const model::ModelConfig& m = e.job.model;
  std::cout << e.info.name << "\n"
            << "  source:     " << e.info.source << "\n"
            << "  params:     " << FormatWithCommas(e.params) << " (memtune, vocab "
            << FormatWithCommas(e.vocab) << ")\n"
            << "  published:  " << FormatWithCommas(e.info.published_parameters) << "\n"
            << "              " << e.info.published_source << "\n";
  if (!e.info.relation.empty()) std::cout << "  relation:   " << e.info.relation << "\n";
  std::cout << "  layers:     " << m.num_layers << ", hidden " << m.hidden_size << ", heads "
            << m.num_attention_heads << ", experts " << Experts(m) << "\n  by part:\n";
  std::vector<std::vector<std::string>> rows;
  for (const Part& part : Parts(e))
    rows.push_back({"    " + part.label, FormatWithCommas(part.params)});
  std::cout << RenderTable(rows, {false, true});
}

int Show(const std::string& name, OutputFormat format) {
  auto entry = LoadEntry(name);
  if (!entry) {
    const Error& e = entry.error();
    return PrintError(
        "models", e.code == ErrorCode::kNotFound ? Error{e.code, "NAME", e.message, e.hint} : e);
  }
  if (format == OutputFormat::kJson) {
    ordered_json j = EntryJson(*entry);
    ordered_json parts = ordered_json::array();
    for (const Part& part : Parts(*entry)) {
      parts.push_back({{"part", part.key}, {"layers", part.layers}, {"params", part.params}});
    }
    j["parts"] = parts;
    std::cout << ordered_json{{"schema", "memtune.models/1"}, {"models", ordered_json::array({j})}}
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    PrintDetail(*entry);
  }
  return kExitOk;
}

int List(OutputFormat format) {
  std::vector<ModelEntry> entries;
  for (const std::string& name : model::ModelPresetNames()) {
    auto entry = LoadEntry(name);
    if (!entry) return PrintError("models", entry.error());
    entries.push_back(*entry);
  }
  if (format == OutputFormat::kJson) {
    ordered_json list = ordered_json::array();
    for (const ModelEntry& e : entries) list.push_back(EntryJson(e));
    std::cout << ordered_json{{"schema", "memtune.models/1"}, {"models", list}}.dump(
                     2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    PrintList(entries);
  }
  return kExitOk;
}

}  // namespace

int RunModels(int argc, char** argv) {
  CLI::App app(
      "List the model catalog: the architectures memtune knows by name, with memtune's "
      "parameter count and the published one.",
      "memtune models");
  app.footer(
      "A name can be used as model.preset in a job document (or --model).\n"
      "\nExamples:\n"
      "  memtune models\n"
      "  memtune models deepseek-v3\n"
      "  memtune models --format json");
  std::string name;
  app.add_option("NAME", name, "show one model: counts by part, published count and sources");
  OutputFormat format = OutputFormat::kText;
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;
  return name.empty() ? List(format) : Show(name, format);
}

}  // namespace memtune::cli
