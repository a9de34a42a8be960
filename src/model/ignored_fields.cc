// Lookup in the classification of inputs memtune does not model (the rows are in
// ignored_flags_*.cc and ignored_fields_bridge.cc).
#include "memtune/model/ignored_fields.h"

#include <algorithm>
#include <vector>

#include "model/ignored_fields_tables.h"

namespace memtune::model {
namespace {

const std::vector<IgnoredInput>& Flags() {
  static const std::vector<IgnoredInput> kFlags = [] {
    std::vector<IgnoredInput> all(internal::MemoryRelevantFlags().begin(),
                                  internal::MemoryRelevantFlags().end());
    all.insert(all.end(), internal::OtherFlags().begin(), internal::OtherFlags().end());
    std::sort(all.begin(), all.end(), [](const IgnoredInput& a, const IgnoredInput& b) {
      return std::string_view(a.name) < std::string_view(b.name);
    });
    return all;
  }();
  return kFlags;
}

// How well a row names `name`: 0 = not at all, else longer is better (exact beats all).
std::size_t MatchLength(const IgnoredInput& entry, std::string_view name) {
  const std::string_view pattern = entry.name;
  if (pattern == name) return pattern.size() + 1000;
  if (pattern.empty() || pattern.back() != '*') return 0;
  const std::string_view stem = pattern.substr(0, pattern.size() - 1);
  return name.substr(0, stem.size()) == stem ? stem.size() : 0;
}

template <typename Rows>
const IgnoredInput* BestRow(const Rows& rows, std::string_view name) {
  const IgnoredInput* best = nullptr;
  std::size_t best_length = 0;
  for (const IgnoredInput& entry : rows) {
    const std::size_t length = MatchLength(entry, name);
    if (length > best_length) best = &entry, best_length = length;
  }
  return best;
}

// "model.fp32_residual_connection" -> "fp32-residual-connection"; "" for a field of a
// section whose classes are not the ones argparse derives flags from.
std::string FlagStem(std::string_view field_path) {
  static constexpr std::string_view kSections[] = {"model.", "train.",   "optimizer.",
                                                   "ddp.",   "dataset.", "mixed_precision."};
  for (const std::string_view section : kSections) {
    if (field_path.substr(0, section.size()) != section) continue;
    std::string stem(field_path.substr(section.size()));
    std::replace(stem.begin(), stem.end(), '_', '-');
    return stem;
  }
  return "";
}

IgnoredMatch ClassifyBridgeField(std::string_view name) {
  if (const IgnoredInput* row = BestRow(internal::BridgeFields(), name)) return {row, false};
  const std::string stem = FlagStem(name);
  if (stem.empty()) return {};
  if (const IgnoredInput* row = BestRow(Flags(), "--" + stem)) return {row, false};
  for (const char* negation : {"--no-", "--disable-"}) {
    if (const IgnoredInput* row = BestRow(Flags(), negation + stem)) return {row, true};
  }
  return {};
}

}  // namespace

std::span<const IgnoredInput> IgnoredInputs() {
  static const std::vector<IgnoredInput> kAll = [] {
    std::vector<IgnoredInput> all = Flags();
    all.insert(all.end(), internal::BridgeFields().begin(), internal::BridgeFields().end());
    return all;
  }();
  return kAll;
}

IgnoredMatch ClassifyIgnored(std::string_view name) {
  if (name.rfind("--", 0) != 0) return ClassifyBridgeField(name);
  return {BestRow(Flags(), name.substr(0, name.find('='))), false};
}

const IgnoredInput* FindIgnoredInput(std::string_view name) { return ClassifyIgnored(name).entry; }

std::string IgnoredInputsMarkdown() {
  std::string out = "| input | changes memory | effect |\n|---|---|---|\n";
  for (const IgnoredInput& entry : IgnoredInputs()) {
    out += std::string("| `") + entry.name + "` | " + (entry.memory_relevant ? "yes" : "no") +
           " | " + entry.effect;
    if (*entry.inert != '\0') out += std::string(" (no effect at: ") + entry.inert + ")";
    out += " |\n";
  }
  return out;
}

}  // namespace memtune::model
