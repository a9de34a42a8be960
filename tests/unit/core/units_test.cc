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
