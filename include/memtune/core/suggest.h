// "Did you mean" suggestions for unknown names (fields, presets, options, subcommands).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace memtune {

// Levenshtein distance (insert, delete, substitute, each cost 1), case-sensitive.
std::size_t EditDistance(std::string_view a, std::string_view b);

// EditDistance(a, b) when it is at most `bound`, else bound + 1. O(1) when the lengths differ
// by more than `bound` (so a hostile 10 MiB name costs nothing against short candidates),
// else O(|a| * |b|) at worst, stopping at the first row of the table whose minimum passes
// `bound`.
std::size_t EditDistanceAtMost(std::string_view a, std::string_view b, std::size_t bound);

// The candidate closest to `name` if its distance is at most max(2, name.size() / 4),
// else an empty string. Ties go to the earliest candidate.
// Example: Suggest("hiden_size", {"hidden_size", "num_layers"}) == "hidden_size".
std::string Suggest(std::string_view name, const std::vector<std::string>& candidates);

// "did you mean 'X'?" or "" when there is no close candidate.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates);

// Joins names as "a, b, c".
std::string JoinNames(const std::vector<std::string>& names, std::string_view sep = ", ");

}  // namespace memtune
