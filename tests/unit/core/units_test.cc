#include "memtune/core/units.h"

#include <gtest/gtest.h>

namespace memtune {
namespace {

TEST(UnitsTest, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseBytes("20MiB", "x"), 20 * kMiB);
  EXPECT_EQ(*ParseBytes("1.5 GiB", "x"), 3 * kGiB / 2);
  EXPECT_EQ(*ParseBytes("80GB", "x"), 80 * kGB);
  EXPECT_EQ(*ParseBytes("512k", "x"), 512 * kKiB);
  EXPECT_EQ(*ParseBytes("123", "x"), 123);
}

TEST(UnitsTest, RejectsBadSizesNamingTheField) {
  auto r = ParseBytes("12XB", "--capacity");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().field, "--capacity");
  EXPECT_EQ(r.error().message,
            "unknown unit 'xb' in '12XB'; allowed: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB");
  EXPECT_FALSE(ParseBytes("", "x").has_value());
  EXPECT_FALSE(ParseBytes("-5", "x").has_value());
  EXPECT_FALSE(ParseBytes("1.2.3", "x").has_value());
  EXPECT_FALSE(ParseBytes("99999999TiB", "x").has_value());
}

TEST(UnitsTest, DeviceBytesAreOneByteToOnePebibyte) {
  EXPECT_EQ(*ParseDeviceBytes("80GiB", "--capacity"), 80 * kGiB);
  EXPECT_EQ(*ParseDeviceBytes("1024TiB", "--capacity"), kMaxDeviceBytes);
  EXPECT_EQ(ParseDeviceBytes("0", "--capacity").error().Describe(),
            "--capacity: '0' must be positive and at most 1024 TiB, the largest device memory memtune simulates");
  EXPECT_FALSE(ParseDeviceBytes("1025TiB", "--capacity").has_value());
  EXPECT_EQ(ParseDeviceBytes("12XB", "--capacity").error().Describe(),
            ParseBytes("12XB", "--capacity").error().Describe());  // ParseBytes' own errors
}

TEST(UnitsTest, RejectsFractionsOfAByte) {
  // 1.5 bytes used to round to 2 (and '0.1B' to 0); sizes are whole bytes.
  auto r = ParseBytes("1.5", "bytes");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().field, "bytes");
  EXPECT_EQ(r.error().message, "'1.5' is 1.5 bytes; a size is a whole number of bytes");
  EXPECT_FALSE(ParseBytes("0.1KiB", "x").has_value());  // 102.4 bytes
  EXPECT_EQ(*ParseBytes("0.5KiB", "x"), 512);
  EXPECT_EQ(*ParseBytes("2.0", "x"), 2);
}

TEST(UnitsTest, Formats) {
  EXPECT_EQ(FormatBytesBinary(0), "0 B");
  EXPECT_EQ(FormatBytesBinary(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytesBinary(20 * kMiB), "20.00 MiB");
  EXPECT_EQ(FormatGB(58800000000), "58.80 GB");
  EXPECT_EQ(FormatWithCommas(70553706496), "70,553,706,496");
  EXPECT_EQ(FormatWithCommas(-1234), "-1,234");
}

}  // namespace
}  // namespace memtune
