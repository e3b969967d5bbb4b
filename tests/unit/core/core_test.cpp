// Core: Philox against its published known answers, counter-based draws, f16/bf16 rounding,
// size parsing and error formatting.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "sluice/core/dtype.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/core/units.hpp"

namespace sluice {
namespace {

TEST(Philox4x32, MatchesRandom123KnownAnswers) {
  // Known-answer vectors from Random123's kat_vectors for philox4x32_10.
  EXPECT_EQ(philox4x32({0, 0}, {0, 0, 0, 0}),
            (std::array<std::uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}),
            (std::array<std::uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0xa4093822, 0x299f31d0}, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}),
            (std::array<std::uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(CounterRng, SameCounterSameDrawsDifferentCounterDifferentDraws) {
  CounterRng a(derive_key(7, 1), 42, 3);
  CounterRng b(derive_key(7, 1), 42, 3);
  CounterRng c(derive_key(7, 1), 43, 3);
  CounterRng d(derive_key(7, 2), 42, 3);
  int differ_c = 0;
  int differ_d = 0;
  for (int i = 0; i < 100; ++i) {
    const std::uint32_t x = a.next_u32();
    EXPECT_EQ(x, b.next_u32());
    differ_c += x != c.next_u32();
    differ_d += x != d.next_u32();
  }
  EXPECT_GT(differ_c, 95);
  EXPECT_GT(differ_d, 95);
}

TEST(CounterRng, UniformAndBelowAreInRangeAndUnbiased) {
  CounterRng rng(1, 2, 3);
  double sum = 0;
  std::array<int, 7> counts{};
  for (int i = 0; i < 70000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    const auto k = rng.below(7);
    ASSERT_LT(k, 7u);
    ++counts[k];
  }
  EXPECT_NEAR(sum / 70000, 0.5, 0.01);
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);
}

TEST(Half, F16RoundTripsEveryF16Value) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f))));
      continue;
    }
    ASSERT_EQ(float_to_f16(f), h) << std::hex << h;
  }
}

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // halfway to the next: rounds to even = inf
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3c00);  // tie, even stays
  EXPECT_EQ(float_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, odd rounds up
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);   // tie to even: zero
  EXPECT_EQ(float_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
}

TEST(Half, Bf16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(3.140625f)), 3.140625f);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd up
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Units, ParsesBinaryAndDecimalSizes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("1.5 GiB"), 3ull << 29);
  EXPECT_EQ(parse_size("2g"), 2ull << 30);
  EXPECT_EQ(parse_size("64KB"), 64000u);
  EXPECT_EQ(parse_size("1TB"), 1000000000000ull);
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("MiB"));
  EXPECT_FALSE(parse_size("12 parsecs"));
  EXPECT_FALSE(parse_size("-5"));
  EXPECT_EQ(4_GiB, 4ull << 30);
  EXPECT_EQ(format_bytes(17), "17 B");
  EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
}

TEST(Error, MessageNamesPathAndCause) {
  const Error e(ErrorCode::kCorruptData, "premature end of data", "/data/a.jpg");
  EXPECT_STREQ(e.what(), "/data/a.jpg: premature end of data");
  EXPECT_EQ(e.cause(), "premature end of data");
  EXPECT_EQ(e.path(), "/data/a.jpg");
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_STREQ(Error(ErrorCode::kInvalidArgument, "batch size must be at least 1").what(),
               "batch size must be at least 1");
}

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(parse_dtype("BF16"), DType::kBF16);
  EXPECT_FALSE(parse_dtype("f64"));
  EXPECT_EQ(size_of(DType::kF16), 2u);
  EXPECT_EQ(Shape({2, 3, 4}).elements(), 24);
  EXPECT_EQ(Shape({2, 3, 4}).to_string(), "(2, 3, 4)");
}

}  // namespace
}  // namespace sluice
