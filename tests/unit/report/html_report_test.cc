// The page data of `memtune report` and the HTML page around it (report/html_report.h).
#include "memtune/report/html_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace memtune::report {
namespace {

using nlohmann::json;

model::Job ExampleJob() {
  auto text = model::ExampleJobYaml("llama3-70b-32xh100");
  EXPECT_TRUE(text.has_value());
  auto doc = model::ParseJobText(text ? *text : "");
  EXPECT_TRUE(doc.has_value()) << doc.error().Describe();
  return doc ? doc->job : model::Job{};
}

TEST(JobReportData, TimelineAndSegmentMapCoverBothModes) {
  const model::Job job = ExampleJob();
  auto assessment = assess::AssessJob(job);
  ASSERT_TRUE(assessment.has_value()) << assessment.error().Describe();
  JobReportInput in;
  in.job = &job;
  in.assessment = &*assessment;
  auto text = RenderJobReportData(in);
  ASSERT_TRUE(text.has_value()) << text.error().Describe();
  const json data = json::parse(*text);
  EXPECT_EQ(data["schema"], "memtune.report/1");
  EXPECT_EQ(data["kind"], "job");
  const json& t = data["timeline"];
  const std::size_t events = t["events"];
  EXPECT_GT(events, 1000u);
  EXPECT_EQ(t["allocated_bytes"].size(), events);
  EXPECT_EQ(t["labels"]["phase"].size(), events);
  ASSERT_EQ(t["modes"].size(), 2u);
  EXPECT_EQ(t["modes"][0]["mode"], "native");
  EXPECT_EQ(t["modes"][1]["mode"], "expandable");
  // The seed case: native segments hold far more free (cached) memory at their peak.
  ASSERT_EQ(data["segments"].size(), 2u);
  const std::int64_t native_free = data["segments"][0]["free_bytes"];
  const std::int64_t expandable_free = data["segments"][1]["free_bytes"];
  EXPECT_GT(native_free, 10 * expandable_free);
  // The replay's peak equals the forecast's for the same rank and mode.
  const int rank = t["rank"];
  EXPECT_EQ(t["modes"][0]["peak_reserved_bytes"],
            assessment->forecast->stages[rank].own.peak_reserved_bytes);
}

TEST(DiagnosisReportData, EmbedsTheDiagnosis) {
  diagnose::Diagnosis d;
  const json data = json::parse(RenderDiagnosisReportData(d, "oom.txt"));
  EXPECT_EQ(data["kind"], "oom");
  EXPECT_EQ(data["title"], "memtune report: oom.txt");
  EXPECT_EQ(data["diagnosis"]["schema"], "memtune.diagnose/1");
}

TEST(HtmlReport, InlinesEverythingAndKeepsScriptsClosed) {
  auto page = RenderHtmlReport(R"({"title":"</script><b>"})", "a <title>");
  if (!HtmlFrontEndAvailable()) {
    ASSERT_FALSE(page.has_value());
    EXPECT_EQ(page.error().code, ErrorCode::kUnsupported);
    GTEST_SKIP() << "built without the report front end";
  }
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->find("@@"), std::string::npos);
  EXPECT_NE(page->find(R"({"title":"<\/script><b>"})"), std::string::npos);
  EXPECT_NE(page->find("<title>a &lt;title&gt;</title>"), std::string::npos);
  EXPECT_EQ(page->find("<script src"), std::string::npos);
  EXPECT_EQ(page->find("<link rel=\"stylesheet\""), std::string::npos);
}

}  // namespace
}  // namespace memtune::report
