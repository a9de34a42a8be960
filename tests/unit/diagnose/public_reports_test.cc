// The real OOM reports of ../shared/data/oom-reports-public.jsonl (outside the repository;
// skipped when absent): every report diagnoses without an error, and the cause matches the
// label on at least 85% of the high- and medium-confidence reports. Prints the confusion
// table (label x diagnosed); scripts/diagnose-reports prints the same through the CLI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "memtune/diagnose/diagnose.h"

namespace memtune::diagnose {
namespace {

constexpr double kMinAccuracy = 0.85;

const char* kReports = MEMTUNE_SOURCE_DIR "/../shared/data/oom-reports-public.jsonl";

void PrintTable(const std::map<std::pair<std::string, std::string>, int>& table) {
  std::cout << "label -> diagnosed: count\n";
  for (const auto& [key, n] : table) {
    std::cout << "  " << key.first << " -> " << key.second << ": " << n << "\n";
  }
}

TEST(PublicReportsTest, CausesMatchTheLabels) {
  if (!std::filesystem::exists(kReports)) GTEST_SKIP() << kReports << " not found";
  std::ifstream in(kReports);
  std::map<std::pair<std::string, std::string>, int> table;
  int counted = 0, right = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json r = nlohmann::json::parse(line);
    const std::string id = r.value("id", "?");
    auto input = ReadDiagnoseInput(id, r.at("text").get<std::string>());
    ASSERT_TRUE(input.has_value()) << id << ": " << input.error().Describe();
    auto d = Diagnose({*input});
    ASSERT_TRUE(d.has_value()) << id << ": " << d.error().Describe();
    const std::string label = r.at("cause").get<std::string>();
    const std::string got = model::NameOf(d->cause);
    ++table[{label, got}];
    const std::string confidence = r.at("confidence").get<std::string>();
    if (confidence == "high" || confidence == "medium") {
      ++counted;
      right += got == label ? 1 : 0;
    }
  }
  PrintTable(table);
  std::cout << "high+medium: " << right << "/" << counted << "\n";
  ASSERT_GT(counted, 0);
  EXPECT_GE(static_cast<double>(right), kMinAccuracy * counted);
}

}  // namespace
}  // namespace memtune::diagnose
