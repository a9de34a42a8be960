// Report-header summaries of a job: its precision and where it came from, its parameters.
#include "memtune/model/job_summary.h"

#include <fmt/format.h>

#include "memtune/core/units.h"
#include "memtune/model/catalog.h"
#include "memtune/model/parameters.h"

namespace memtune::model {
namespace {

std::string Billions(std::int64_t count) {
  return fmt::format("{:.2f} B", static_cast<double>(count) / 1e9);
}

const char* Compute(const ModelConfig& m) {
  if (m.bf16) return "bf16";
  if (m.fp16) return "fp16";
  return "fp32";
}

// Which input set the parameter dtype when no mixed_precision preset did.
std::string DtypeSource(const JobDocument& doc) {
  const auto defaulted = doc.defaulted_fields.find("model.params_dtype");
  if (defaulted == doc.defaulted_fields.end()) {
    return doc.job.model.hf_config.empty() ? "model.params_dtype as the job sets it"
                                           : "model.params_dtype from the HF config's torch_dtype";
  }
  return "Megatron-Core's default: no mixed_precision preset and no dtype field";
}

}  // namespace

std::string DescribePrecision(const JobDocument& doc) {
  const ModelConfig& m = doc.job.model;
  if (doc.job.memtune.framework == Framework::kFsdp2) {
    // torchtitan's MixedPrecisionPolicy: sharded fp32 parameters, computed in param_dtype.
    const Fsdp2Config& f = doc.job.memtune.fsdp2;
    return fmt::format(
        "FSDP2 mixed precision (memtune.fsdp2): fp32 sharded parameters, {} compute, {} "
        "gradient reduce{}",
        DtypeName(f.param_dtype), DtypeName(f.reduce_dtype), f.float8 ? "; float8 linears" : "");
  }
  std::string what =
      fmt::format("{} parameters, {} compute", DtypeName(m.params_dtype), Compute(m));
  if (doc.job.ddp.grad_reduce_in_fp32) what += ", fp32 gradient reduce";
  if (m.fp8 != Fp8Format::kNone) {
    what += fmt::format("; FP8 {} {}", NameOf(m.fp8), NameOf(m.fp8_recipe));
  }
  if (m.fp4 != Fp4Format::kNone) what += fmt::format("; FP4 {}", NameOf(m.fp4));
  const std::string& preset = doc.job.mixed_precision;
  if (!preset.empty()) {
    const auto defaulted = doc.defaulted_fields.find("mixed_precision");
    const std::string origin =
        defaulted != doc.defaulted_fields.end()
            ? "default for a catalog model: Megatron-Bridge's recipes train in it; --precision "
              "to change"
            : std::string(preset == "custom" ? "mixed_precision mapping"
                                             : "mixed_precision preset");
    const auto& declared = doc.spec.mixed_precision;
    if (preset == "custom" && declared && !declared->base_preset.empty()) {
      return fmt::format("{} with changes ({}): {}", declared->base_preset, origin, what);
    }
    return fmt::format("{} ({}): {}", preset, origin, what);
  }
  std::string line = fmt::format("no mixed_precision preset: {} ({})", what, DtypeSource(doc));
  if (m.params_dtype == Dtype::kFp32 && !m.bf16 && !m.fp16) {
    line += "; pass --precision bf16_mixed (or another Bridge preset) if the run trains in bf16";
  }
  return line;
}

std::string DescribeParameters(const Job& job) {
  const std::int64_t count = CountParameters(job.model, PaddedVocabSize(job));
  std::string line = fmt::format("{} ({})", Billions(count), FormatWithCommas(count));
  if (!job.model.preset.empty()) {
    if (auto info = ModelPresetInfoFor(job.model.preset); info && info->published_parameters > 0) {
      line += fmt::format("; published {} (memtune models {})",
                          Billions(info->published_parameters), job.model.preset);
    }
  }
  return line;
}

}  // namespace memtune::model
