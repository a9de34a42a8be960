// The `mixed_precision` section: Bridge's presets and MixedPrecisionConfig.setup(), which
// copies every precision field onto the model, optimizer and DDP configs, overriding them.
// Megatron-Bridge 067f987d src/megatron/bridge/training/mixed_precision.py.
#include <algorithm>
#include <map>

#include "memtune/core/suggest.h"
#include "model/job_parse_internal.h"

namespace memtune::model {
namespace internal {
namespace {

using MixedPrecision = MixedPrecisionConfig;

// MixedPrecisionConfig.__setattr__ keeps fp8_param and fp8_param_gather (and the fp4 pair)
// equal: setting either sets both.
void SetFp8ParamGather(MixedPrecision& mp, bool on) { mp.fp8_param_gather = on, mp.fp8_param = on; }
void SetFp4ParamGather(MixedPrecision& mp, bool on) { mp.fp4_param_gather = on, mp.fp4_param = on; }

MixedPrecision Bf16Mixed() {
  MixedPrecision mp;
  mp.bf16 = true;
  mp.params_dtype = mp.pipeline_dtype = Dtype::kBf16;
  mp.grad_reduce_in_fp32 = true;
  return mp;
}

MixedPrecision Fp16Mixed() {
  MixedPrecision mp;
  mp.fp16 = true;
  mp.params_dtype = mp.pipeline_dtype = Dtype::kFp16;
  mp.grad_reduce_in_fp32 = false;
  return mp;
}

MixedPrecision WithFp8(MixedPrecision mp, Fp8Format format, Fp8Recipe recipe, bool param_gather) {
  mp.fp8 = format;
  mp.fp8_recipe = recipe;
  SetFp8ParamGather(mp, param_gather);
  return mp;
}

MixedPrecision WithBf16Ends(MixedPrecision mp, int start, int end) {
  mp.first_last_layers_bf16 = true;
  mp.num_layers_at_start_in_bf16 = start;
  mp.num_layers_at_end_in_bf16 = end;
  return mp;
}

MixedPrecision WithMxfp8(MixedPrecision mp) {
  mp = WithFp8(mp, Fp8Format::kE4m3, Fp8Recipe::kMxfp8, true);
  mp.reuse_grad_buf_for_mxfp8_param_ag = true;
  return mp;
}

MixedPrecision Bf16WithNvfp4() {
  MixedPrecision mp = Bf16Mixed();
  mp.fp4 = Fp4Format::kE2m1;
  SetFp8ParamGather(mp, false);
  SetFp4ParamGather(mp, true);
  return mp;
}

// Every preset registered in MIXED_PRECISION_RECIPES (the @register functions).
const std::map<std::string, MixedPrecision>& Presets() {
  static const std::map<std::string, MixedPrecision> kPresets = {
      {"bf16_mixed", Bf16Mixed()},
      {"fp16_mixed", Fp16Mixed()},
      {"bf16_with_fp8_delayed_scaling_mixed",
       WithFp8(Bf16Mixed(), Fp8Format::kHybrid, Fp8Recipe::kDelayed, true)},
      {"fp16_with_fp8_delayed_scaling_mixed",
       WithFp8(Fp16Mixed(), Fp8Format::kHybrid, Fp8Recipe::kDelayed, true)},
      {"bf16_with_mxfp8_mixed", WithMxfp8(Bf16Mixed())},
      {"fp16_with_mxfp8_mixed", WithMxfp8(Fp16Mixed())},
      {"bf16_with_fp8_current_scaling_mixed",
       WithBf16Ends(WithFp8(Bf16Mixed(), Fp8Format::kHybrid, Fp8Recipe::kTensorwise, true), 1, 1)},
      {"nemotron_h_bf16_with_fp8_current_scaling_mixed",
       WithBf16Ends(WithFp8(Bf16Mixed(), Fp8Format::kHybrid, Fp8Recipe::kTensorwise, true), 2, 2)},
      {"nanov2_bf16_with_fp8_current_scaling_mixed",
       WithBf16Ends(WithFp8(Bf16Mixed(), Fp8Format::kHybrid, Fp8Recipe::kBlockwise, true), 2, 2)},
      {"fp16_with_fp8_current_scaling_mixed",
       WithBf16Ends(WithFp8(Fp16Mixed(), Fp8Format::kHybrid, Fp8Recipe::kTensorwise, true), 1, 1)},
      {"bf16_with_fp8_subchannel_scaling_mixed",
       WithFp8(Bf16Mixed(), Fp8Format::kHybrid, Fp8Recipe::kBlockwise, false)},
      {"fp16_with_fp8_subchannel_scaling_mixed",
       WithFp8(Fp16Mixed(), Fp8Format::kHybrid, Fp8Recipe::kBlockwise, false)},
      {"bf16_with_nvfp4_mixed", Bf16WithNvfp4()},
      {"nemotron_3_super_bf16_with_nvfp4_mixed",
       [] {
         MixedPrecision mp = Bf16WithNvfp4();
         mp.first_last_layers_bf16 = true;
         mp.num_layers_at_end_in_bf16 = 14;
         return mp;
       }()},
  };
  return kPresets;
}

// get_mixed_precision_config(): hyphens are accepted for underscores.
Result<MixedPrecision> FindPreset(std::string name, const std::string& path) {
  std::replace(name.begin(), name.end(), '-', '_');
  const auto it = Presets().find(name);
  if (it != Presets().end()) return it->second;
  return NotFound(path, path + " = '" + name + "' is not a Bridge mixed-precision preset",
                  AllowedHint(name, MixedPrecisionPresetNames()));
}

Result<MixedPrecision> LookupPreset(const YAML::Node& node, const std::string& path) {
  MEMTUNE_TRY(std::string name, ToName(node, path));
  return FindPreset(std::move(name), path);
}

// MixedPrecisionConfig fields Bridge has that do not change memory.
const std::vector<std::string>& UnusedFields() {
  static const std::vector<std::string> kUnused = {"fp32",
                                                   "autocast_dtype",
                                                   "autocast_enabled",
                                                   "fp8_margin",
                                                   "fp8_amax_history_len",
                                                   "fp8_amax_compute_algo",
                                                   "fp8_wgrad",
                                                   "fp8_dot_product_attention",
                                                   "fp8_multi_head_attention",
                                                   "fp4_recipe",
                                                   "loss_scale",
                                                   "initial_loss_scale",
                                                   "min_loss_scale",
                                                   "loss_scale_window",
                                                   "hysteresis"};
  return kUnused;
}

using MpReader = std::function<Status(const YAML::Node&, const std::string&, MixedPrecision&)>;

// A bool field: null keeps Bridge's default.
MpReader BoolInto(bool MixedPrecision::*member) {
  return [member](const YAML::Node& n, const std::string& p, MixedPrecision& mp) -> Status {
    if (n.IsNull()) return OkStatus();
    MEMTUNE_TRY(mp.*member, ToBool(n, p));
    return OkStatus();
  };
}

// An Optional[bool] field: null is None.
MpReader BoolInto(std::optional<bool> MixedPrecision::*member) {
  return [member](const YAML::Node& n, const std::string& p, MixedPrecision& mp) -> Status {
    if (n.IsNull()) {
      (mp.*member).reset();
      return OkStatus();
    }
    MEMTUNE_TRY(mp.*member, ToBool(n, p));
    return OkStatus();
  };
}

MpReader DtypeInto(std::optional<Dtype> MixedPrecision::*member) {
  return [member](const YAML::Node& n, const std::string& p, MixedPrecision& mp) -> Status {
    if (n.IsNull()) {
      (mp.*member).reset();
      return OkStatus();
    }
    MEMTUNE_TRY(mp.*member, ToDtype(n, p, {Dtype::kFp32, Dtype::kBf16, Dtype::kFp16}));
    return OkStatus();
  };
}

// A closed-set enum by its name table (memtune/model/job.h); null reads as `null_value`.
template <typename E>
MpReader NamedInto(E MixedPrecision::*member, E null_value) {
  return [member, null_value](const YAML::Node& n, const std::string& p,
                              MixedPrecision& mp) -> Status {
    if (n.IsNull()) {
      mp.*member = null_value;
      return OkStatus();
    }
    std::vector<std::string> allowed;
    for (const EnumName<E>& entry : EnumNames(E{})) allowed.emplace_back(entry.name);
    MEMTUNE_TRY(const std::string name, ToEnum(n, p, allowed));
    for (const EnumName<E>& entry : EnumNames(E{})) {
      if (name == entry.name) mp.*member = entry.value;
    }
    return OkStatus();
  };
}

// An enum value as a document value: its name, or null for the unnamed kNone.
template <typename E>
Json NameOrNull(E value) {
  const char* name = NameOf(value);
  return *name ? Json(name) : Json(nullptr);
}

MpReader IntInto(int MixedPrecision::*member) {
  return [member](const YAML::Node& n, const std::string& p, MixedPrecision& mp) -> Status {
    if (n.IsNull()) return OkStatus();
    MEMTUNE_TRY(const std::int64_t v, ToInt(n, p, 0, 100'000));
    mp.*member = static_cast<int>(v);
    return OkStatus();
  };
}

// The MixedPrecisionConfig fields memtune reads, in dataclass order (which matters for the
// fp8_param / fp8_param_gather sync: the later assignment wins).
const std::vector<std::pair<std::string, MpReader>>& MpFields() {
  using M = MixedPrecision;
  static const std::vector<std::pair<std::string, MpReader>> kFields = {
      {"fp16", BoolInto(&M::fp16)},
      {"bf16", BoolInto(&M::bf16)},
      {"params_dtype", DtypeInto(&M::params_dtype)},
      {"pipeline_dtype", DtypeInto(&M::pipeline_dtype)},
      {"grad_reduce_in_fp32", BoolInto(&M::grad_reduce_in_fp32)},
      {"fp8", NamedInto(&M::fp8, Fp8Format::kNone)},
      {"fp8_recipe", NamedInto(&M::fp8_recipe, Fp8Recipe::kNone)},
      {"first_last_layers_bf16", BoolInto(&M::first_last_layers_bf16)},
      {"fp8_param", BoolInto(&M::fp8_param)},
      {"fp8_param_gather", BoolInto(&M::fp8_param_gather)},
      {"fp4", NamedInto(&M::fp4, Fp4Format::kNone)},
      {"fp4_param", BoolInto(&M::fp4_param)},
      {"fp4_param_gather", BoolInto(&M::fp4_param_gather)},
      {"num_layers_at_start_in_bf16", IntInto(&M::num_layers_at_start_in_bf16)},
      {"num_layers_at_end_in_bf16", IntInto(&M::num_layers_at_end_in_bf16)},
      {"reuse_grad_buf_for_mxfp8_param_ag", BoolInto(&M::reuse_grad_buf_for_mxfp8_param_ag)},
  };
  return kFields;
}

std::vector<std::string> KnownMpNames() {
  std::vector<std::string> names = {"preset"};
  for (const auto& [name, reader] : MpFields()) names.push_back(name);
  return names;
}

// Reads the known fields in dataclass order, so that, as in MixedPrecisionConfig(**fields),
// fp8_param_gather (assigned after fp8_param) wins when the two disagree.
Status ReadKnownFields(const YAML::Node& node, MixedPrecision& mp, ParseContext& ctx) {
  for (const auto& [name, reader] : MpFields()) {
    const YAML::Node value = node[name];
    if (!value) continue;
    const std::string path = "mixed_precision." + name;
    MEMTUNE_RETURN_IF_ERROR(reader(value, path, mp));
    if (name == "fp8_param" && mp.fp8_param) mp.fp8_param_gather = *mp.fp8_param;
    if (name == "fp8_param_gather" && !value.IsNull()) SetFp8ParamGather(mp, mp.fp8_param_gather);
    if (name == "fp4_param" && mp.fp4_param) mp.fp4_param_gather = *mp.fp4_param;
    if (name == "fp4_param_gather" && !value.IsNull()) SetFp4ParamGather(mp, mp.fp4_param_gather);
    ctx.present.insert(path);
  }
  return OkStatus();
}

// Fields memtune does not read: ignored, with a did-you-mean warning for near misses.
void NoteUnknownFields(const YAML::Node& node, ParseContext& ctx) {
  const std::vector<std::string> known = KnownMpNames();
  const auto& unused = UnusedFields();
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key.rfind('_', 0) == 0) continue;  // _target_: Bridge's class tag
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const std::string path = "mixed_precision." + key;
    if (std::find(unused.begin(), unused.end(), key) == unused.end()) {
      if (std::string near = Suggest(key, known); !near.empty()) {
        ctx.Warn(path + " is not a field memtune uses; did you mean '" + near + "'? (ignored)");
      }
    }
    ctx.doc.ignored_fields.push_back(path);
  }
}

Result<MixedPrecision> ReadMapping(const YAML::Node& node, ParseContext& ctx) {
  MixedPrecision mp;
  if (const YAML::Node preset = node["preset"]; preset && !preset.IsNull()) {
    MEMTUNE_TRY(mp, LookupPreset(preset, "mixed_precision.preset"));
  }
  MEMTUNE_RETURN_IF_ERROR(ReadKnownFields(node, mp, ctx));
  NoteUnknownFields(node, ctx);
  const YAML::Node p = node["fp8_param"];
  const YAML::Node g = node["fp8_param_gather"];
  if (p && g && p.IsScalar() && g.IsScalar() && p.as<bool>() != g.as<bool>()) {
    ctx.Warn("mixed_precision.fp8_param = " + p.Scalar() + " is overridden by fp8_param_gather = " +
             g.Scalar() + " (Bridge MixedPrecisionConfig keeps the two in sync)");
  }
  return mp;
}

// The fields setup() writes, as they stand before and after it.
struct PrecisionState {
  ModelBase model;
  Dtype pipeline_dtype = Dtype::kFp32;
  OptimizerConfig optimizer;
  DdpConfig ddp;
};

// A precision field the preset writes, for the "overrides the document" warnings.
struct Target {
  const char* path;
  Json (*get)(const PrecisionState&);
};

const std::vector<Target>& Targets() {
  using S = PrecisionState;
  static const std::vector<Target> kTargets = {
      {"model.bf16", [](const S& j) { return Json(j.model.bf16); }},
      {"model.fp16", [](const S& j) { return Json(j.model.fp16); }},
      {"model.params_dtype", [](const S& j) { return Json(DtypeName(j.model.params_dtype)); }},
      {"model.pipeline_dtype", [](const S& j) { return Json(DtypeName(j.pipeline_dtype)); }},
      {"model.fp8", [](const S& j) { return NameOrNull(j.model.fp8); }},
      {"model.fp8_recipe", [](const S& j) { return NameOrNull(j.model.fp8_recipe); }},
      {"model.fp8_param", [](const S& j) { return Json(j.model.fp8_param); }},
      {"model.fp8_param_gather", [](const S& j) { return Json(j.model.fp8_param_gather); }},
      {"model.fp4", [](const S& j) { return NameOrNull(j.model.fp4); }},
      {"model.fp4_param", [](const S& j) { return Json(j.model.fp4_param); }},
      {"model.first_last_layers_bf16",
       [](const S& j) { return Json(j.model.first_last_layers_bf16); }},
      {"model.num_layers_at_start_in_bf16",
       [](const S& j) { return Json(j.model.num_layers_at_start_in_bf16); }},
      {"model.num_layers_at_end_in_bf16",
       [](const S& j) { return Json(j.model.num_layers_at_end_in_bf16); }},
      {"optimizer.bf16", [](const S& j) { return Json(j.optimizer.bf16); }},
      {"optimizer.fp16", [](const S& j) { return Json(j.optimizer.fp16); }},
      {"ddp.grad_reduce_in_fp32", [](const S& j) { return Json(j.ddp.grad_reduce_in_fp32); }},
      {"ddp.reuse_grad_buf_for_mxfp8_param_ag",
       [](const S& j) { return Json(j.ddp.reuse_grad_buf_for_mxfp8_param_ag); }},
  };
  return kTargets;
}

// What setup() will change in the document's precision fields: one warning for each field the
// document set to another value. The fields it writes no longer count as defaulted.
void NoteSetup(const MixedPrecision& mp, const std::string& label, ParseContext& ctx) {
  const JobSpec& spec = ctx.spec;
  PrecisionState state{spec.model, spec.model.pipeline_dtype.value_or(Dtype::kFp32), spec.optimizer,
                       spec.ddp};
  std::vector<Json> before;
  for (const Target& t : Targets()) before.push_back(t.get(state));
  SetupPrecision(mp, state.model, state.pipeline_dtype, state.optimizer, state.ddp);
  for (std::size_t i = 0; i < Targets().size(); ++i) {
    const Target& t = Targets()[i];
    ctx.doc.defaulted_fields.erase(t.path);
    const Json after = t.get(state);
    if (ctx.Has(t.path) && after != before[i]) {
      ctx.Warn(label + " sets " + t.path + " = " + JsonText(after) + " over the document's " +
               JsonText(before[i]) + " (Bridge MixedPrecisionConfig.setup overrides it)");
    }
  }
}

}  // namespace

// MixedPrecisionConfig.finalize() then setup(): every field with the same name on the
// model, optimizer and DDP configs is overwritten.
void SetupPrecision(MixedPrecisionConfig mp, ModelBase& m, Dtype& pipeline_dtype,
                    OptimizerConfig& optimizer, DdpConfig& ddp) {
  if (!mp.fp8_param) mp.fp8_param = mp.fp8_param_gather;
  if (!mp.fp4_param) mp.fp4_param = mp.fp4_param_gather;
  m.bf16 = mp.bf16;
  m.fp16 = mp.fp16;
  m.params_dtype = mp.params_dtype.value_or(Dtype::kFp32);
  pipeline_dtype = mp.pipeline_dtype.value_or(m.params_dtype);
  m.fp8 = mp.fp8;
  m.fp8_recipe = mp.fp8_recipe;
  m.fp8_param = *mp.fp8_param;
  m.fp8_param_gather = mp.fp8_param_gather;
  m.fp4 = mp.fp4;
  m.fp4_param = *mp.fp4_param;
  m.first_last_layers_bf16 = mp.first_last_layers_bf16;
  m.num_layers_at_start_in_bf16 = mp.num_layers_at_start_in_bf16;
  m.num_layers_at_end_in_bf16 = mp.num_layers_at_end_in_bf16;
  optimizer.bf16 = mp.bf16;
  optimizer.fp16 = mp.fp16;
  ddp.grad_reduce_in_fp32 = mp.grad_reduce_in_fp32;
  ddp.reuse_grad_buf_for_mxfp8_param_ag = mp.reuse_grad_buf_for_mxfp8_param_ag;
}

Status ApplyMixedPrecision(const YAML::Node& node, ParseContext& ctx) {
  std::optional<MixedPrecisionSpec>& spec = ctx.spec.mixed_precision;
  if (!node || node.IsNull()) {
    spec.reset();
    const bool dtype_given =
        ctx.Has("model.bf16") || ctx.Has("model.fp16") || ctx.Has("model.params_dtype");
    // A catalog model without any precision: Megatron-Bridge's recipes for these models
    // train in bf16_mixed (recipes/*: mixed_precision="bf16_mixed"), not MCore's fp32.
    if (!node && !ctx.spec.model.preset.empty() && !dtype_given &&
        ctx.spec.memtune.framework == Framework::kMegatron) {
      MEMTUNE_TRY(const MixedPrecision mp,
                  LookupPreset(YAML::Node("bf16_mixed"), "mixed_precision"));
      spec = MixedPrecisionSpec{"bf16_mixed", mp, ""};
      NoteSetup(mp, "mixed_precision 'bf16_mixed'", ctx);
      ctx.doc.defaulted_fields["mixed_precision"] =
          "Megatron-Bridge's recipes train catalog models in bf16_mixed";
      return OkStatus();
    }
    ctx.doc.defaulted_fields["mixed_precision"] = "Bridge ConfigContainer: no preset";
    return OkStatus();
  }
  if (node.IsMap()) {
    MEMTUNE_TRY(const MixedPrecision mp, ReadMapping(node, ctx));
    std::string base = ScalarText(node["preset"]);
    std::replace(base.begin(), base.end(), '-', '_');
    spec = MixedPrecisionSpec{"custom", mp, base};
    NoteSetup(mp, "mixed_precision", ctx);
    return OkStatus();
  }
  MEMTUNE_TRY(const MixedPrecision mp, LookupPreset(node, "mixed_precision"));
  std::string name = ScalarText(node);
  std::replace(name.begin(), name.end(), '-', '_');
  spec = MixedPrecisionSpec{name, mp, ""};
  NoteSetup(mp, "mixed_precision '" + name + "'", ctx);
  return OkStatus();
}

bool IsMixedPrecisionField(const std::string& name) {
  const std::vector<std::string> known = KnownMpNames();
  return std::find(known.begin(), known.end(), name) != known.end();
}

}  // namespace internal

Result<MixedPrecisionSpec> MixedPrecisionPreset(std::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  MEMTUNE_TRY(MixedPrecisionConfig config, internal::FindPreset(key, "mixed_precision"));
  return MixedPrecisionSpec{key, std::move(config), ""};
}

std::vector<std::string> MixedPrecisionPresetNames() {
  std::vector<std::string> names;
  for (const auto& [name, mp] : internal::Presets()) names.push_back(name);
  return names;
}

}  // namespace memtune::model
