// Diagnose(): read every input, decide the cause, list the fixes, compare with the job.
#include "memtune/diagnose/diagnose.h"

#include "diagnose/findings.h"
#include "diagnose/job_compare.h"
#include "diagnose/plan_fixes.h"

namespace memtune::diagnose {
namespace {

constexpr model::EnumName<Cause> kCauseNames[] = {
    {"fragmentation", Cause::kFragmentation},
    {"capacity_model_state", Cause::kCapacityModelState},
    {"capacity_activations", Cause::kCapacityActivations},
    {"other_process", Cause::kOtherProcess},
    {"non_pytorch", Cause::kNonPytorch},
    {"leak", Cause::kLeak},
    {"imbalance", Cause::kImbalance},
    {"checkpoint_load", Cause::kCheckpointLoad},
    {"eval_or_generation", Cause::kEvalOrGeneration},
    {"config_conflict", Cause::kConfigConflict},
    {"unknown", Cause::kUnknown},
};
constexpr model::EnumName<Confidence> kConfidenceNames[] = {
    {"low", Confidence::kLow}, {"medium", Confidence::kMedium}, {"high", Confidence::kHigh}};

// Text may hold the odd control byte (2.2-2.3 messages print the device index as one);
// binary data holds many.
constexpr double kMaxControlFraction = 0.01;
constexpr int kMinControlBytes = 4;

bool LooksBinary(std::string_view bytes) {
  int control = 0;
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f') ++control;
  }
  return control >= kMinControlBytes &&
         static_cast<double>(control) > kMaxControlFraction * static_cast<double>(bytes.size());
}

constexpr const char* kLookedFor =
    "looked for a PyTorch/NCCL/cuBLAS out-of-memory message, a configuration error, Megatron / "
    "torchtitan / DeepSpeed memory lines, nvidia-smi output or a memory snapshot";

}  // namespace

std::span<const model::EnumName<Cause>> EnumNames(Cause) { return kCauseNames; }
std::span<const model::EnumName<Confidence>> EnumNames(Confidence) { return kConfidenceNames; }

Result<DiagnoseInput> ReadDiagnoseInput(std::string name, std::string bytes) {
  DiagnoseInput input;
  input.name = name;
  if (bytes.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidInput(name, "empty input", kLookedFor);
  }
  if (snapshot::IsGzip(bytes) || static_cast<unsigned char>(bytes[0]) == 0x80) {
    auto snap = snapshot::LoadSnapshot(std::move(bytes));
    if (!snap) return InvalidInput(name, snap.error().Describe(), snap.error().hint);
    input.snapshot = std::move(*snap);
    return input;
  }
  if (LooksBinary(bytes)) {
    return InvalidInput(name, "binary data that is not a memory snapshot (neither gzip nor pickle)",
                        kLookedFor);
  }
  input.text = std::move(bytes);
  return input;
}

Result<Diagnosis> Diagnose(const std::vector<DiagnoseInput>& inputs,
                           const DiagnoseOptions& options) {
  if (inputs.empty()) return InvalidInput("", "no input", kLookedFor);
  Findings findings;
  std::string names;
  for (const DiagnoseInput& in : inputs) {
    names += (names.empty() ? "" : ", ") + in.name;
    if (in.snapshot) {
      MEMTUNE_RETURN_IF_ERROR(ReadSnapshot(in.name, *in.snapshot, options.torch_version, findings));
    } else {
      ReadText(in.name, in.text, findings);
    }
  }
  if (!HasAnything(findings) && findings.snapshots_without_oom.empty()) {
    return InvalidInput(names, "no memory information found", kLookedFor);
  }
  std::optional<assess::Assessment> assessment;
  std::optional<JobFacts> facts;
  if (options.job) {
    MEMTUNE_TRY(assessment, assess::AssessJob(*options.job));
    facts = FactsOf(*options.job, *assessment);
  }
  Decision decision = Decide(findings, facts);
  Diagnosis d;
  d.cause = decision.cause;
  d.confidence = decision.confidence;
  d.fixes = FixesFor(decision, findings, options.job ? &*options.job : nullptr);
  d.evidence = std::move(decision.evidence);
  d.notes = std::move(decision.notes);
  for (const std::string& name : findings.snapshots_without_oom) {
    d.notes.push_back(name +
                      ": the snapshot records no OOM event; dump it from an OOM observer "
                      "(torch._C._cuda_attach_out_of_memory_observer) so it holds the failure");
  }
  if (assessment) {
    PredictFixes(*assessment, d.fixes);
    AddPlanCosts(*options.job, d.fixes);
    d.comparison = Compare(*assessment, findings);
  }
  return d;
}

}  // namespace memtune::diagnose
