// PyTorch version profiles: parsing "2.4"/"main" and the rule set of each release.
// See note [version profile] in docs/design/allocator.md for where each boundary comes from.
#include <cctype>
#include <string>

#include "memtune/alloc/config.h"

namespace memtune::alloc {
namespace {

constexpr int kFirstMinor = 1;  // 2.1: first release with expandable segments
constexpr int kLastMinor = 10;  // newest numbered release memtune models

bool ParseSmallInt(std::string_view text, int& out) {
  if (text.empty() || text.size() > 3) return false;
  out = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

}  // namespace

std::string TorchVersion::ToString() const {
  if (IsMain()) return "main";
  return std::to_string(major) + "." + std::to_string(minor);
}

Result<TorchVersion> ParseTorchVersion(std::string_view text, std::string_view field) {
  const std::string where(field);
  const std::string allowed = "allowed: 2.1 to 2.10 (e.g. 2.4, 2.4.1+cu121) or main";
  if (text == "main") return TorchVersion{2, TorchVersion::kMainMinor};
  std::string_view s = text;
  if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) s.remove_prefix(1);
  s = s.substr(0, s.find('+'));
  const std::size_t dot = s.find('.');
  int major = 0, minor = 0;
  std::string_view rest = dot == std::string_view::npos ? "" : s.substr(dot + 1);
  std::string_view minor_text = rest.substr(0, rest.find('.'));
  int patch = 0;
  const bool patch_ok = rest.find('.') == std::string_view::npos ||
                        ParseSmallInt(rest.substr(rest.find('.') + 1), patch);
  if (dot == std::string_view::npos || !ParseSmallInt(s.substr(0, dot), major) ||
      !ParseSmallInt(minor_text, minor) || !patch_ok) {
    return InvalidInput(where, std::string("'").append(text) + "' is not a PyTorch version",
                        allowed);
  }
  if (major != 2 || minor < kFirstMinor || minor > kLastMinor) {
    return Unsupported(where, "PyTorch " + std::string(text) + " is not modelled", allowed);
  }
  return TorchVersion{major, minor};
}

VersionRules RulesFor(TorchVersion v) {
  auto at_least = [&](int minor) { return v >= TorchVersion{2, minor}; };
  VersionRules r{};
  r.roundup_needs_two_divisions = at_least(4);
  r.roundup_gt_fills_after_last = at_least(9);
  r.roundup_list_accepts_zero = at_least(4);
  r.divisions_spelling_fixed = at_least(8);
  r.core_config_parser = at_least(9);
  r.has_max_non_split_rounding = at_least(5);
  r.has_large_segment_size = v.IsMain();
  r.has_per_process_memory_fraction = at_least(10);
  r.fraction_only_below_one = at_least(10);
  r.has_release_lock_on_cudamalloc = at_least(3);
  r.has_pinned_register_options = at_least(2);
  r.has_pinned_background_threads = at_least(5);
  r.has_pinned_reserve_segment = at_least(8);
  r.has_graph_capture_record_stream_reuse = at_least(8);
  r.oom_template =
      at_least(4) ? OomTemplate::kV24 : (at_least(2) ? OomTemplate::kV22 : OomTemplate::kV21);
  r.oom_docs_pytorch_org_url = at_least(9);
  return r;
}

}  // namespace memtune::alloc
