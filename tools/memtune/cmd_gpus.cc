// memtune gpus: the GPU catalog (capacity, CUDA context, speeds, interconnect, sources).
#include <iostream>
#include <nlohmann/json.hpp>

#include "catalog_table.h"
#include "command.h"
#include "commands.h"
#include "memtune/core/units.h"
#include "memtune/model/gpu_catalog.h"

namespace memtune::cli {
namespace {

using model::GpuSpec;
using nlohmann::ordered_json;

std::string Fp8(const GpuSpec& gpu) {
  return gpu.fp8_dense_tflops ? FormatNumber(*gpu.fp8_dense_tflops) : "-";
}

ordered_json GpuJson(const GpuSpec& gpu) {
  ordered_json j;
  j["name"] = gpu.name;
  j["aliases"] = gpu.aliases;
  j["description"] = gpu.description;
  j["total_memory_bytes"] = gpu.total_memory_bytes;
  j["total_memory_basis"] = gpu.total_memory_basis;
  j["cuda_context_bytes"] = gpu.cuda_context_bytes;
  j["driver_reserved_bytes"] = {{"central", gpu.driver_reserved_bytes},
                                {"low", gpu.driver_reserved_low_bytes},
                                {"high", gpu.driver_reserved_high_bytes}};
  j["compute_capability"] = gpu.compute_capability;
  j["bf16_dense_tflops"] = gpu.bf16_dense_tflops;
  j["fp8_dense_tflops"] =
      gpu.fp8_dense_tflops ? ordered_json(*gpu.fp8_dense_tflops) : ordered_json();
  j["hbm_bandwidth_gbps"] = gpu.hbm_bandwidth_gbps;
  j["interconnect_bandwidth_gbps"] = gpu.interconnect_bandwidth_gbps;
  j["gpus_per_node"] = gpu.gpus_per_node;
  j["sm_count"] = gpu.sm_count;
  j["fp4_dense_tflops"] =
      gpu.fp4_dense_tflops ? ordered_json(*gpu.fp4_dense_tflops) : ordered_json();
  j["nvlink_domain_gpus"] = gpu.nvlink_domain_gpus;
  j["scaleout_bandwidth_gbps"] = gpu.scaleout_bandwidth_gbps;
  j["host_link_bandwidth_gbps"] = gpu.host_link_bandwidth_gbps;
  j["host_memory_bandwidth_gbps"] = gpu.host_memory_bandwidth_gbps;
  ordered_json sources = ordered_json::object();
  for (const auto& [key, text] : gpu.sources) sources[key] = text;
  j["sources"] = sources;
  return j;
}

void PrintTable(const std::vector<GpuSpec>& gpus) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "MEMORY", "BYTES", "BASIS", "CONTEXT",
                                                 "BF16 TF", "FP8 TF", "HBM GB/s", "LINK GB/s",
                                                 "PER NODE"}};
  for (const GpuSpec& g : gpus) {
    rows.push_back({g.name, FormatBytesBinary(g.total_memory_bytes),
                    std::to_string(g.total_memory_bytes), g.total_memory_basis,
                    FormatBytesBinary(g.cuda_context_bytes), FormatNumber(g.bf16_dense_tflops),
                    Fp8(g), FormatNumber(g.hbm_bandwidth_gbps),
                    FormatNumber(g.interconnect_bandwidth_gbps), std::to_string(g.gpus_per_node)});
  }
  std::cout << RenderTable(rows, {false, true, true, false, true, true, true, true, true, true})
            << "\nBYTES: torch.cuda.get_device_properties().total_memory (BASIS: exact, torch_mib "
               "or nvml_mib). TF: dense Tensor Core TFLOPS.\n"
               "LINK: NVLink / Infinity Fabric per GPU (0 = PCIe only). "
               "Sources: 'memtune gpus NAME'.\n";
}

void PrintDetail(const GpuSpec& g) {
  std::string aliases;
  for (const std::string& a : g.aliases) aliases += (aliases.empty() ? "" : ", ") + a;
  std::vector<std::vector<std::string>> rows = {
      {"  description", g.description},
      {"  aliases", aliases},
      {"  total_memory_bytes", std::to_string(g.total_memory_bytes) + " (" +
                                   FormatBytesBinary(g.total_memory_bytes) + ", " +
                                   g.total_memory_basis + ")"},
      {"  cuda_context_bytes",
       std::to_string(g.cuda_context_bytes) + " (" + FormatBytesBinary(g.cuda_context_bytes) + ")"},
      {"  driver_reserved_bytes", std::to_string(g.driver_reserved_bytes) + " (" +
                                      FormatBytesBinary(g.driver_reserved_bytes) + ", range " +
                                      FormatBytesBinary(g.driver_reserved_low_bytes) + " to " +
                                      FormatBytesBinary(g.driver_reserved_high_bytes) + ")"},
      {"  compute_capability", g.compute_capability},
      {"  bf16_dense_tflops", FormatNumber(g.bf16_dense_tflops)},
      {"  fp8_dense_tflops", Fp8(g)},
      {"  hbm_bandwidth_gbps", FormatNumber(g.hbm_bandwidth_gbps)},
      {"  interconnect_bandwidth_gbps", FormatNumber(g.interconnect_bandwidth_gbps)},
      {"  gpus_per_node", std::to_string(g.gpus_per_node)},
      {"  sm_count", std::to_string(g.sm_count)},
      {"  fp4_dense_tflops", g.fp4_dense_tflops ? FormatNumber(*g.fp4_dense_tflops) : "-"},
      {"  nvlink_domain_gpus", std::to_string(g.nvlink_domain_gpus)},
      {"  scaleout_bandwidth_gbps", FormatNumber(g.scaleout_bandwidth_gbps)},
      {"  host_link_bandwidth_gbps", FormatNumber(g.host_link_bandwidth_gbps)},
      {"  host_memory_bandwidth_gbps", FormatNumber(g.host_memory_bandwidth_gbps)}};
  std::cout << g.name << "\n" << RenderTable(rows, {false, false}) << "  sources:\n";
  for (const auto& [key, text] : g.sources) std::cout << "    " << key << ": " << text << "\n";
}

}  // namespace

int RunGpus(int argc, char** argv) {
  CLI::App app(
      "List the GPU catalog: memory capacity as PyTorch reports it, the typical CUDA context, "
      "dense TFLOPS, memory and interconnect bandwidth, with a source for every number.",
      "memtune gpus");
  app.footer(
      "A name or alias can be used as memtune.gpu in a job document (or --gpu).\n"
      "\nExamples:\n"
      "  memtune gpus\n"
      "  memtune gpus h100\n"
      "  memtune gpus --format json");
  std::string name;
  app.add_option("NAME", name, "show one GPU with its aliases and sources");
  OutputFormat format = OutputFormat::kText;
  AddFormatOption(app, format);
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;
  std::vector<GpuSpec> gpus = model::AllGpus();
  if (!name.empty()) {
    auto gpu = model::FindGpu(name);
    if (!gpu)
      return PrintError("gpus",
                        Error{gpu.error().code, "NAME", gpu.error().message, gpu.error().hint});
    gpus = {*gpu};
  }
  if (format == OutputFormat::kJson) {
    ordered_json list = ordered_json::array();
    for (const GpuSpec& g : gpus) list.push_back(GpuJson(g));
    std::cout << ordered_json{{"schema", "memtune.gpus/1"}, {"gpus", list}}.dump(
                     2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else if (name.empty()) {
    PrintTable(gpus);
  } else {
    PrintDetail(gpus.front());
  }
  return kExitOk;
}

}  // namespace memtune::cli
