// ReadInputFile / ReadInputStream / CheckNotDirectory: directories and endless inputs are
// errors naming the field, not an empty document or an exhausted memory.
#include "memtune/core/file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace memtune {
namespace {

TEST(FileTest, ReadsAFileWhole) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "memtune_file_test.yaml";
  std::ofstream(path) << "model: {}\n";
  auto text = ReadInputFile(path.string(), "JOB");
  ASSERT_TRUE(text.has_value()) << text.error().Describe();
  EXPECT_EQ(*text, "model: {}\n");
  std::filesystem::remove(path);
}

TEST(FileTest, MissingFileIsNotFound) {
  auto text = ReadInputFile("/nonexistent/job.yaml", "JOB");
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(text.error().Describe(), "JOB: cannot read '/nonexistent/job.yaml'");
}

TEST(FileTest, DirectoryIsAnError) {
  // An ifstream opens a directory and reads nothing: it passed for an empty job document.
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto text = ReadInputFile(dir, "JOB");
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().Describe(), "JOB: '" + dir + "' is a directory");
  EXPECT_EQ(text.error().hint, "allowed: a file");
  EXPECT_FALSE(CheckNotDirectory(dir, "TRACE").has_value());
  EXPECT_TRUE(CheckNotDirectory("/nonexistent/x", "TRACE").has_value());
}

TEST(FileTest, EndlessInputStopsAtTheLimit) {
  // /dev/zero as a job file read until memory ran out.
  std::istringstream in(std::string(5000, 'x'));
  auto text = ReadInputStream(in, "FILE", "<stdin>", 4096);
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().Describe(), "FILE: '<stdin>' is longer than 4,096 bytes");
  EXPECT_EQ(text.error().hint, "allowed: an input file up to 4.00 KiB");
  std::istringstream small(std::string(4096, 'x'));
  EXPECT_EQ(ReadInputStream(small, "FILE", "<stdin>", 4096)->size(), 4096u);
}

TEST(FileTest, DevZeroIsRefused) {
  if (!std::filesystem::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  auto text = ReadInputFile("/dev/zero", "JOB", 1 << 20);
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().Describe(), "JOB: '/dev/zero' is longer than 1,048,576 bytes");
}

}  // namespace
}  // namespace memtune
