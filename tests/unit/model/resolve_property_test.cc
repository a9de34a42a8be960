// ResolveJob against the parser, over thousands of generated layouts of every catalog model:
// a document with the layout, parsed, must give the same Job (or the same error) as the
// base document's spec with the same fields edited in memory and resolved.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "memtune/model/catalog.h"
#include "memtune/model/job_emit.h"
#include "memtune/model/job_parse.h"
#include "memtune/model/job_spec.h"

namespace memtune::model {
namespace {

constexpr int kLayoutsPerModel = 200;        // x 13 catalog models = 2,600 layouts
constexpr std::uint32_t kSeed = 20'261'201;  // fixed: the run is deterministic
constexpr int kInvalidOneIn = 12;            // about 8% of layouts have one size out of range

// One generated layout: the fields a planner varies. std::nullopt = not written (derive).
struct Layout {
  int tp = 1, pp = 1, cp = 1, ep = 1;
  std::optional<int> vpp, etp, world;
  std::int64_t mbs = 1;
  std::optional<std::int64_t> gbs;
  RecomputeGranularity granularity = RecomputeGranularity::kNone;
  RecomputeMethod method = RecomputeMethod::kNone;
  std::optional<int> recompute_num_layers;
  std::optional<std::vector<std::string>> recompute_modules;
  bool cpu_offloading = false;
  int cpu_offloading_num_layers = 0;
  bool fine_grained_offloading = false;
  std::vector<std::string> offload_modules;
};

class Gen {
 public:
  explicit Gen(std::uint32_t seed) : rng_(seed) {}
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint32_t>(n)); }
  bool Coin() { return Pick(2) == 0; }
  template <typename T>
  T OneOf(const std::vector<T>& values) {
    return values[static_cast<std::size_t>(Pick(static_cast<int>(values.size())))];
  }

 private:
  std::mt19937 rng_;
};

// Puts one size out of the document's range, so that both paths must fail alike.
void BreakOneSize(Gen& g, Layout& l) {
  switch (g.Pick(8)) {
    case 0:
      l.tp = 0;
      break;
    case 1:
      l.pp = 0;
      break;
    case 2:
      l.cp = -1;
      break;
    case 3:
      l.vpp = 0;
      break;
    case 4:
      l.etp = 200'000;
      break;
    case 5:
      l.mbs = 0;
      break;
    case 6:
      l.gbs = 0;
      break;
    default:
      l.world = 0;
      break;
  }
}

Layout Generate(Gen& g) {
  Layout l;
  l.tp = g.OneOf<int>({1, 2, 4, 8, 3});
  l.pp = g.OneOf<int>({1, 2, 4, 8});
  l.cp = g.OneOf<int>({1, 1, 2, 4});
  l.ep = g.OneOf<int>({1, 2, 8, 16});
  if (g.Coin()) l.vpp = g.OneOf<int>({1, 2, 4, 5});
  if (g.Coin()) l.etp = g.OneOf<int>({1, 2, 4});
  if (g.Coin()) l.world = l.tp * l.pp * l.cp * g.OneOf<int>({1, 2, 4, 16});
  l.mbs = g.OneOf<std::int64_t>({1, 2, 4});
  if (g.Coin()) l.gbs = g.OneOf<std::int64_t>({8, 64, 256, 1536});
  l.granularity = g.OneOf<RecomputeGranularity>(
      {RecomputeGranularity::kNone, RecomputeGranularity::kSelective, RecomputeGranularity::kFull});
  l.method = g.OneOf<RecomputeMethod>(
      {RecomputeMethod::kNone, RecomputeMethod::kUniform, RecomputeMethod::kBlock});
  if (g.Coin()) l.recompute_num_layers = g.OneOf<int>({0, 1, 4});
  if (g.Coin()) {
    l.recompute_modules =
        g.OneOf<std::vector<std::string>>({{"core_attn"}, {"mlp", "layernorm"}, {"moe_act"}, {}});
  }
  l.cpu_offloading = g.Coin();
  l.cpu_offloading_num_layers = g.OneOf<int>({0, 1, 2});
  l.fine_grained_offloading = g.Coin();
  if (g.Coin()) l.offload_modules = {"core_attn", "attn_norm"};
  if (g.Pick(kInvalidOneIn) == 0) BreakOneSize(g, l);
  return l;
}

const char* GranularityName(RecomputeGranularity g) {
  return g == RecomputeGranularity::kSelective ? "selective"
         : g == RecomputeGranularity::kFull    ? "full"
                                               : "null";
}

const char* MethodName(RecomputeMethod m) {
  return m == RecomputeMethod::kUniform ? "uniform"
         : m == RecomputeMethod::kBlock ? "block"
                                        : "null";
}

std::string List(const std::vector<std::string>& names) {
  std::string text = "[";
  for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + names[i];
  return text + "]";
}

// The base document every layout starts from.
std::string BaseText(const std::string& preset) {
  return "model:\n  preset: " + preset +
         "\nmixed_precision: bf16_mixed\ndataset: {seq_length: 4096}\n";
}

// Path (a): the base document with the layout written into it.
std::string DocumentText(const std::string& preset, const Layout& l) {
  std::ostringstream out;
  out << "model:\n  preset: " << preset << "\n"
      << "  tensor_model_parallel_size: " << l.tp << "\n"
      << "  pipeline_model_parallel_size: " << l.pp << "\n"
      << "  context_parallel_size: " << l.cp << "\n"
      << "  expert_model_parallel_size: " << l.ep << "\n";
  if (l.vpp) out << "  virtual_pipeline_model_parallel_size: " << *l.vpp << "\n";
  if (l.etp) out << "  expert_tensor_parallel_size: " << *l.etp << "\n";
  out << "  recompute_granularity: " << GranularityName(l.granularity) << "\n"
      << "  recompute_method: " << MethodName(l.method) << "\n";
  if (l.recompute_num_layers) out << "  recompute_num_layers: " << *l.recompute_num_layers << "\n";
  if (l.recompute_modules) out << "  recompute_modules: " << List(*l.recompute_modules) << "\n";
  out << "  cpu_offloading: " << (l.cpu_offloading ? "true" : "false") << "\n"
      << "  cpu_offloading_num_layers: " << l.cpu_offloading_num_layers << "\n"
      << "  fine_grained_activation_offloading: " << (l.fine_grained_offloading ? "true" : "false")
      << "\n"
      << "  offload_modules: " << List(l.offload_modules) << "\n";
  out << "train:\n  micro_batch_size: " << l.mbs << "\n";
  if (l.gbs) out << "  global_batch_size: " << *l.gbs << "\n";
  out << "mixed_precision: bf16_mixed\ndataset: {seq_length: 4096}\n";
  if (l.world) out << "memtune: {world_size: " << *l.world << "}\n";
  return out.str();
}

// Path (b): the base spec with the same fields edited in memory.
JobSpec Edited(JobSpec spec, const Layout& l) {
  ModelSpec& m = spec.model;
  m.tensor_model_parallel_size = l.tp;
  m.pipeline_model_parallel_size = l.pp;
  m.context_parallel_size = l.cp;
  m.expert_model_parallel_size = l.ep;
  if (l.vpp) m.virtual_pipeline_model_parallel_size = l.vpp;
  if (l.etp) m.expert_tensor_parallel_size = l.etp;
  m.recompute_granularity = l.granularity;
  m.recompute_method = l.method;
  if (l.recompute_num_layers) m.recompute_num_layers = l.recompute_num_layers;
  if (l.recompute_modules) m.recompute_modules = *l.recompute_modules;
  m.cpu_offloading = l.cpu_offloading;
  m.cpu_offloading_num_layers = l.cpu_offloading_num_layers;
  m.fine_grained_activation_offloading = l.fine_grained_offloading;
  m.offload_modules = l.offload_modules;
  spec.train.micro_batch_size = l.mbs;
  if (l.gbs) spec.train.global_batch_size = l.gbs;
  if (l.world) spec.memtune.world_size = l.world;
  return spec;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The fields in which two jobs differ, named by document path ("model.kv_channels: 128 |
// 64"), from `memtune job`'s rendering of each; every Job member is compared by ==.
std::string JobDiff(const Job& a, const Job& b) {
  JobDocument da, db;
  da.job = a;
  db.job = b;
  const std::vector<std::string> la = Lines(FormatJobYaml(da));
  const std::vector<std::string> lb = Lines(FormatJobYaml(db));
  std::string diff, section;
  for (std::size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    const std::string x = i < la.size() ? la[i] : "<none>";
    const std::string y = i < lb.size() ? lb[i] : "<none>";
    if (!x.empty() && x[0] != ' ' && x.back() == ':') section = x.substr(0, x.size() - 1);
    const auto strip = [](const std::string& t) { return t.substr(t.find_first_not_of(' ')); };
    if (x != y) diff += "  " + section + "." + strip(x) + " | " + strip(y) + "\n";
  }
  return diff.empty() ? "  (a field memtune job does not print)\n" : diff;
}

std::string ErrorText(const Error& e) {
  return std::to_string(static_cast<int>(e.code)) + " [" + e.field + "] " + e.message + " (" +
         e.hint + ")";
}

TEST(ResolvePropertyTest, EditedSpecResolvesLikeTheDocument) {
  Gen gen(kSeed);
  int compared = 0, failed_alike = 0;
  for (const std::string& preset : ModelPresetNames()) {
    auto base = ParseJobText(BaseText(preset));
    ASSERT_TRUE(base) << preset << ": " << base.error().Describe();
    for (int i = 0; i < kLayoutsPerModel; ++i) {
      const Layout layout = Generate(gen);
      const std::string text = DocumentText(preset, layout);
      auto parsed = ParseJobText(text);
      auto resolved = ResolveJob(Edited(base->spec, layout));
      ++compared;
      ASSERT_EQ(parsed.has_value(), resolved.has_value())
          << text << "\nparse: " << (parsed ? "ok" : ErrorText(parsed.error()))
          << "\nresolve: " << (resolved ? "ok" : ErrorText(resolved.error()));
      if (!parsed) {
        ASSERT_EQ(ErrorText(parsed.error()), ErrorText(resolved.error())) << text;
        ++failed_alike;
        continue;
      }
      ASSERT_TRUE(parsed->job == *resolved) << text << "\ndocument | edited spec:\n"
                                            << JobDiff(parsed->job, *resolved);
      // The document's own spec resolves to its job as well.
      auto again = ResolveJob(parsed->spec);
      ASSERT_TRUE(again && *again == parsed->job) << text;
    }
  }
  EXPECT_GE(compared, 2000);
  EXPECT_GT(failed_alike, 100);  // the invalid layouts were exercised
  EXPECT_LT(failed_alike, compared / 4);
}

// The diff helper names the field that differs.
TEST(ResolvePropertyTest, DiffNamesTheField) {
  auto doc = ParseJobText(BaseText("llama3-8b"));
  ASSERT_TRUE(doc);
  Job other = doc->job;
  other.model.kv_channels = 64;
  EXPECT_FALSE(doc->job == other);
  EXPECT_NE(JobDiff(doc->job, other).find("model.kv_channels: 128 | kv_channels: 64"),
            std::string::npos)
      << JobDiff(doc->job, other);
  other = doc->job;
  other.model.moe_layer_freq_is_list = true;  // == compares every member
  EXPECT_FALSE(doc->job == other);
}

}  // namespace
}  // namespace memtune::model
