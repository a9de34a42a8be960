// TraceSynthesizer: the per-job plan (sizes from the tensor model the estimator shares,
// src/tensors/) and the trace writer.
#include "memtune/synth/synthesize.h"

#include <algorithm>

#include "memtune/core/units.h"
#include "synth/fsdp2_generator.h"
#include "synth/generator.h"
#include "tensors/layer_plan.h"

namespace memtune::synth {
namespace {

Status CheckSupported(const model::Job& job, const SynthOptions& options) {
  if (options.iterations < 1) {
    return InvalidInput("iterations",
                        "must be at least 1, got " + std::to_string(options.iterations));
  }
  if (job.ddp.use_megatron_fsdp) {
    return Unsupported("ddp.use_megatron_fsdp",
                       "Megatron-FSDP parameter gathers are not synthesized yet");
  }
  if (job.model.cuda_graph_impl == model::CudaGraphImpl::kFullIteration) {
    return Unsupported("model.cuda_graph_impl",
                       "full_iteration CUDA graphs use private pools; not modelled");
  }
  return OkStatus();
}

// micro-batches (iterations x micro-batches per iteration): the longest replay synthesized.
// Its cost grows linearly (about 10 ms per micro-batch of a 20-layer rank); past this a job
// took minutes, and 10^9 micro-batches exhausted memory, so it is refused instead.
constexpr std::int64_t kMaxReplayedMicrobatches = 8192;

// `field`: what set the count (the option, or the global batch it derives from).
Status CheckReplayLength(std::int64_t microbatches, int iterations, const char* field) {
  if (microbatches * iterations <= kMaxReplayedMicrobatches) return OkStatus();
  return Unsupported(field,
                     std::to_string(microbatches) + " micro-batches per iteration x " +
                         std::to_string(iterations) + " iterations is too long a replay",
                     "allowed: up to " + FormatWithCommas(kMaxReplayedMicrobatches) +
                         " micro-batches in all; replay fewer (num_microbatches): the "
                         "schedule's steady state repeats");
}

// Model state of one unit: a stage holding just that layer / the embedding / the output.
UnitState MakeUnit(const model::Job& job, const Plan& plan, int pp_rank, estimate::ModelChunk unit,
                   int layer, const char* name, bool fp8_transpose) {
  estimate::StageLayout stage;
  stage.pp_rank = pp_rank;
  stage.chunks.push_back(unit);
  const tensors::RankParams params =
      tensors::CountRankParams(job, plan.facts.params, stage, plan.pp_size);
  return UnitState{layer, name, tensors::ComputeModelState(job, params, fp8_transpose)};
}

std::vector<UnitState> PlanUnits(const model::Job& job, const Plan& plan, int pp_rank,
                                 const estimate::ModelChunk& chunk, bool fp8_t) {
  std::vector<UnitState> units;
  estimate::ModelChunk base;
  base.vp_stage = chunk.vp_stage;
  if (chunk.has_embedding) {
    estimate::ModelChunk u = base;
    u.has_embedding = true;
    units.push_back(MakeUnit(job, plan, pp_rank, u, -1, "embedding", fp8_t));
  }
  for (int i = 0; i < chunk.num_layers; ++i) {
    estimate::ModelChunk u = base;
    u.first_layer = chunk.first_layer + i;
    u.num_layers = 1;
    units.push_back(MakeUnit(job, plan, pp_rank, u, u.first_layer, "layer", fp8_t));
  }
  if (chunk.num_mtp_layers > 0) {
    estimate::ModelChunk u = base;
    u.num_mtp_layers = chunk.num_mtp_layers;
    units.push_back(
        MakeUnit(job, plan, pp_rank, u, static_cast<int>(job.model.num_layers), "mtp", fp8_t));
  }
  if (chunk.has_output) {
    estimate::ModelChunk u = base;
    u.has_output = true;
    units.push_back(MakeUnit(job, plan, pp_rank, u, -1, "output", fp8_t));
  }
  return units;
}

}  // namespace

TraceSynthesizer::TraceSynthesizer(std::unique_ptr<Plan> plan) : plan_(std::move(plan)) {}
TraceSynthesizer::~TraceSynthesizer() = default;
TraceSynthesizer::TraceSynthesizer(TraceSynthesizer&&) noexcept = default;
TraceSynthesizer& TraceSynthesizer::operator=(TraceSynthesizer&&) noexcept = default;

Result<TraceSynthesizer> TraceSynthesizer::Create(const model::Job& job,
                                                  const SynthOptions& options) {
  MEMTUNE_RETURN_IF_ERROR(CheckSupported(job, options));
  if (job.memtune.framework == model::Framework::kFsdp2) {
    auto plan = std::make_unique<Plan>();
    MEMTUNE_TRY(tensors::Fsdp2Facts first, tensors::MakeFsdp2Facts(job, 0));
    const int stages = first.pp * first.virtual_stages;
    plan->fsdp2.push_back(std::move(first));
    for (int s = 1; s < stages; ++s) {
      MEMTUNE_TRY(tensors::Fsdp2Facts facts, tensors::MakeFsdp2Facts(job, s));
      plan->fsdp2.push_back(std::move(facts));
    }
    plan->pp_size = plan->fsdp2.front().pp;
    plan->iterations = options.iterations;
    plan->num_microbatches = plan->fsdp2.front().microbatches;
    MEMTUNE_RETURN_IF_ERROR(
        CheckReplayLength(plan->num_microbatches, plan->iterations, "train.global_batch_size"));
    return TraceSynthesizer(std::move(plan));
  }
  MEMTUNE_TRY(auto stages, estimate::BuildPipelineLayout(job.model));
  const auto& m = job.model;
  auto plan = std::make_unique<Plan>();
  plan->facts = tensors::MakeJobFacts(job, options.num_microbatches);
  plan->pp_size = static_cast<int>(stages.size());
  plan->iterations = options.iterations;
  plan->num_microbatches = plan->facts.num_microbatches;
  MEMTUNE_RETURN_IF_ERROR(
      CheckReplayLength(plan->num_microbatches, plan->iterations,
                        options.num_microbatches ? "num_microbatches" : "train.global_batch_size"));
  plan->group_size = plan->facts.group_size;
  plan->ep_overlap = m.overlap_moe_expert_parallel_comm;
  const tensors::ActContext& ctx = plan->facts.act;
  plan->sp = ctx.hid_div > 1;
  plan->local_hidden = plan->facts.local_hidden_per_mb;
  for (int moe = 0; moe < 2; ++moe) {
    for (int fp8 = 0; fp8 < 2; ++fp8)
      plan->sizes[moe][fp8] = tensors::MakeLayerSizes(ctx, moe == 1, fp8 == 1);
  }
  if (plan->facts.moe_load.active()) {
    for (int fp8 = 0; fp8 < 2; ++fp8)
      plan->moe_sizes[fp8] = tensors::MakeMoeLayerSizes(ctx, fp8 == 1);
  }
  const bool fp8_t = tensors::KeepsFp8Transpose(job);
  plan->state_rules = tensors::MakeModelStateRules(job, fp8_t);
  plan->ranks.resize(stages.size());
  for (const auto& stage : stages) {
    RankPlan& rank = plan->ranks[stage.pp_rank];
    if (plan->facts.params.param_layout) {
      rank.opt_layout =
          tensors::LayoutRank(job, plan->facts.params.layout, plan->facts.params.moe_pattern,
                              stage.chunks, stage.pp_rank, true);
    }
    rank.workspaces = tensors::ComputeRankWorkspaces(plan->facts.workspaces, stage.chunks,
                                                     plan->facts.params.moe_pattern);
    for (const auto& chunk : stage.chunks) {
      ChunkPlan cp;
      cp.layers = tensors::PlanChunkLayers(m, plan->facts.params.moe_pattern, chunk);
      cp.has_embedding = chunk.has_embedding;
      cp.has_output = chunk.has_output;
      cp.units = PlanUnits(job, *plan, stage.pp_rank, chunk, fp8_t);
      rank.chunks.push_back(std::move(cp));
    }
  }
  return TraceSynthesizer(std::move(plan));
}

int TraceSynthesizer::num_stages() const { return plan_->pp_size; }
int TraceSynthesizer::iterations() const { return plan_->iterations; }
int TraceSynthesizer::last_microbatch() const {
  return static_cast<int>(std::max<std::int64_t>(1, plan_->num_microbatches) - 1);
}

TraceSummary TraceSynthesizer::Synthesize(int pp_rank, EventSink& sink) const {
  if (!plan_->fsdp2.empty()) {
    if (!plan_->fsdp2.front().Pipelined()) {
      Fsdp2Generator generator(plan_->fsdp2.front(), plan_->iterations, sink);
      return generator.Run();
    }
    std::vector<const tensors::Fsdp2Facts*> local;  // stages pp_rank, pp_rank + pp, ...
    for (std::size_t s = pp_rank; s < plan_->fsdp2.size(); s += plan_->pp_size)
      local.push_back(&plan_->fsdp2[s]);
    return Fsdp2Generator::RunRank(local, plan_->iterations, sink);
  }
  Generator generator(*plan_, pp_rank, sink);
  return generator.Run();
}

namespace {

class TextSink : public EventSink {
 public:
  explicit TextSink(std::ostream& out) : out_(out) {}
  bool OnEvent(const SynthEvent& e) override {
    if (e.op == EventOp::kAlloc) {
      out_ << "alloc h" << e.handle << ' ' << e.bytes;
      if (e.stream != 0) out_ << ' ' << e.stream;
    } else {
      out_ << "free h" << e.handle;
    }
    out_ << "  # " << FormatLabel(e.label) << '\n';
    return true;
  }

 private:
  std::ostream& out_;
};

}  // namespace

TraceSummary WriteTrace(const TraceSynthesizer& synth, int pp_rank, std::ostream& out) {
  out << "# memtune synthesized allocation trace: pipeline rank " << pp_rank << ", "
      << synth.iterations() << " iteration(s) after start-up (docs/synth.md)\n";
  TextSink sink(out);
  return synth.Synthesize(pp_rank, sink);
}

}  // namespace memtune::synth
