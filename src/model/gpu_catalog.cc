// The GPU catalog: parses the embedded data/gpus.yaml once.
#include "memtune/model/gpu_catalog.h"

#include <yaml-cpp/yaml.h>

#include <cctype>

#include "memtune/core/check.h"
#include "memtune/core/embedded.h"
#include "memtune/core/suggest.h"

namespace memtune {
extern const EmbeddedFile kGpuCatalogFiles[];  // generated from data/gpus.yaml
}  // namespace memtune

namespace memtune::model {
namespace {

GpuSpec ParseGpu(const YAML::Node& node, const std::string& context_source,
                 const std::string& capability_source) {
  GpuSpec gpu;
  gpu.name = node["name"].as<std::string>();
  gpu.aliases = node["aliases"].as<std::vector<std::string>>();
  gpu.description = node["description"].as<std::string>();
  gpu.total_memory_bytes = node["total_memory_bytes"].as<std::int64_t>();
  gpu.total_memory_basis = node["total_memory_basis"].as<std::string>();
  gpu.cuda_context_bytes = node["cuda_context_bytes"].as<std::int64_t>();
  if (const YAML::Node reserve = node["driver_reserved_bytes"]) {
    gpu.driver_reserved_bytes = reserve["central"].as<std::int64_t>();
    gpu.driver_reserved_low_bytes = reserve["low"].as<std::int64_t>();
    gpu.driver_reserved_high_bytes = reserve["high"].as<std::int64_t>();
  }
  gpu.compute_capability = node["compute_capability"].as<std::string>();
  gpu.bf16_dense_tflops = node["bf16_dense_tflops"].as<double>();
  if (!node["fp8_dense_tflops"].IsNull())
    gpu.fp8_dense_tflops = node["fp8_dense_tflops"].as<double>();
  gpu.hbm_bandwidth_gbps = node["hbm_bandwidth_gbps"].as<double>();
  gpu.interconnect_bandwidth_gbps = node["interconnect_bandwidth_gbps"].as<double>();
  gpu.gpus_per_node = node["gpus_per_node"].as<int>();
  gpu.sm_count = node["sm_count"].as<int>();
  if (!node["fp4_dense_tflops"].IsNull())
    gpu.fp4_dense_tflops = node["fp4_dense_tflops"].as<double>();
  gpu.nvlink_domain_gpus = node["nvlink_domain_gpus"].as<int>();
  gpu.scaleout_bandwidth_gbps = node["scaleout_bandwidth_gbps"].as<double>();
  gpu.host_link_bandwidth_gbps = node["host_link_bandwidth_gbps"].as<double>();
  gpu.host_memory_bandwidth_gbps = node["host_memory_bandwidth_gbps"].as<double>();
  gpu.sources = node["sources"].as<std::map<std::string, std::string>>();
  gpu.sources.emplace("cuda_context_bytes", context_source);
  gpu.sources.emplace("compute_capability", capability_source);
  return gpu;
}

// The embedded file is build input, not user input: a malformed one is a defect that the
// unit tests catch, so it aborts rather than returning an Error.
std::vector<GpuSpec> ParseCatalog() {
  MEMTUNE_CHECK(kGpuCatalogFiles[0].name != nullptr, "data/gpus.yaml is not embedded");
  std::vector<GpuSpec> gpus;
  try {
    const YAML::Node root = YAML::Load(kGpuCatalogFiles[0].contents);
    const std::string context_source = root["cuda_context_source"].as<std::string>();
    const std::string capability_source = root["compute_capability_source"].as<std::string>();
    for (const YAML::Node& node : root["gpus"]) {
      gpus.push_back(ParseGpu(node, context_source, capability_source));
    }
  } catch (const YAML::Exception&) {
    MEMTUNE_CHECK(false, "data/gpus.yaml is malformed");
  }
  return gpus;
}

// Lower case without spaces, '_' and '-': "NVIDIA H100_80GB" -> "nvidiah10080gb".
std::string Normalize(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '_' || c == '-') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

}  // namespace

const std::vector<GpuSpec>& AllGpus() {
  static const std::vector<GpuSpec> gpus = ParseCatalog();
  return gpus;
}

Result<GpuSpec> FindGpu(std::string_view name) {
  MEMTUNE_TRY(const GpuSpec* gpu, FindGpuEntry(name));
  return *gpu;
}

Result<const GpuSpec*> FindGpuEntry(std::string_view name) {
  for (const GpuSpec& gpu : AllGpus()) {
    if (gpu.name == name) return &gpu;
  }
  const std::string key = Normalize(name);
  std::vector<std::string> names;
  for (const GpuSpec& gpu : AllGpus()) {
    if (Normalize(gpu.name) == key) return &gpu;
    for (const std::string& alias : gpu.aliases) {
      if (Normalize(alias) == key) return &gpu;
    }
    names.push_back(gpu.name);
  }
  std::string hint = DidYouMean(name, names);
  hint += std::string(hint.empty() ? "" : " ") + "known GPUs: " + JoinNames(names);
  return NotFound("memtune.gpu", "unknown GPU '" + std::string(name) + "'", hint);
}

}  // namespace memtune::model
