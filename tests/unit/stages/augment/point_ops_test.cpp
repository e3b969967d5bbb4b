// The point ops against torchvision on PIL images (ImageOps / ImageEnhance underneath): equal bytes
// on generated images (1 and 3 channels, noise, gradients, low contrast, flat) and on real photos;
// in place equal to out of place; the same bytes from several threads at once; bad values refused;
// zero-size and one-pixel images; the sharpness workspace bound.
#include <gtest/gtest.h>

#include <thread>

#include "augment_test_util.hpp"
#include "sluice/core/error.hpp"
#include "stages/augment/point_ops.hpp"

namespace sluice::stages {
namespace {

using test::Img;

struct Case {
  std::string op;    // torchvision's name
  std::string args;  // the job's arguments
  double value = 0;  // bits, threshold or factor
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all{
      {"posterize", "bits=0", 0},      {"posterize", "bits=1", 1},         {"posterize", "bits=4", 4},
      {"posterize", "bits=8", 8},      {"solarize", "threshold=0", 0},     {"solarize", "threshold=128", 128},
      {"solarize", "threshold=200.5", 200.5}, {"solarize", "threshold=256", 256},
      {"invert", "", 0},               {"autocontrast", "", 0},            {"equalize", "", 0},
      {"adjust_sharpness", "factor=0", 0},    {"adjust_sharpness", "factor=0.3", 0.3},
      {"adjust_sharpness", "factor=1", 1},    {"adjust_sharpness", "factor=1.9", 1.9},
      {"adjust_sharpness", "factor=5", 5}};
  return all;
}

// Runs one op of `cases()` out of place (or in place) into a new image.
Img run_op(const Case& c, const Img& in, bool in_place = false) {
  Img out = in;
  ConstImageView src = in_place ? ConstImageView(out.mut()) : in.view();
  ImageView dst = out.mut();
  if (c.op == "posterize") posterize(src, dst, static_cast<int>(c.value));
  else if (c.op == "solarize") solarize(src, dst, c.value);
  else if (c.op == "invert") invert(src, dst);
  else if (c.op == "autocontrast") autocontrast(src, dst);
  else if (c.op == "equalize") equalize(src, dst);
  else {
    std::vector<std::byte> ws(sharpness_workspace_bytes({in.width, in.height}, in.channels));
    adjust_sharpness(src, dst, static_cast<float>(c.value), ws);
  }
  return out;
}

std::vector<Img> generated_inputs() {
  std::vector<Img> inputs;
  for (int channels : {1, 3}) {
    inputs.push_back(test::noise(61, 47, channels, 7));
    inputs.push_back(test::pattern(64, 48, channels, 3));
    inputs.push_back(test::dull(33, 70, channels, 5));
    Img flat(9, 5, channels);
    std::fill(flat.pixels.begin(), flat.pixels.end(), std::uint8_t{77});
    inputs.push_back(flat);
    inputs.push_back(test::noise(3, 3, channels, 11));  // the smallest image SMOOTH filters
    inputs.push_back(test::noise(2, 7, channels, 12));  // narrower than the filter: unchanged
  }
  return inputs;
}

void expect_parity(const std::vector<Img>& inputs, const char* what) {
  test::Torchvision tv;
  std::vector<std::pair<int, Img>> ours;
  for (const auto& in : inputs) {
    for (const auto& c : cases()) ours.emplace_back(tv.add(c.op, in, c.args), run_op(c, in));
  }
  SLUICE_RUN_REFERENCE(tv);
  std::size_t k = 0;
  for (const auto& in : inputs) {
    for (const auto& c : cases()) {
      const auto& [index, got] = ours[k++];
      const auto d = test::diff(got, tv.output(index));
      EXPECT_EQ(d.max, 0) << what << " " << c.op << " " << c.args << " on " << in.width << "x" << in.height
                          << "x" << in.channels << ": " << d.exact * 100 << "% equal";
    }
  }
}

TEST(PointOps, GeneratedImagesEqualTorchvisionOnPil) { expect_parity(generated_inputs(), "generated"); }

TEST(PointOps, RealPhotosEqualTorchvisionOnPil) {
  SLUICE_REQUIRE_DATASET(dir, "imagenet-photos");
  test::Torchvision decoder;
  std::vector<Img> inputs;
  for (const char* name : {"n00007846_147031_person.jpg", "n00007846_149204_person.jpg"}) {
    inputs.push_back(decoder.decode((dir / name).string(), 3));
    ASSERT_TRUE(decoder.error().empty()) << decoder.error();
  }
  inputs.push_back(decoder.decode((dir / "n00007846_152343_person.jpg").string(), 1));
  expect_parity(inputs, "photo");
}

TEST(PointOps, InPlaceEqualsOutOfPlace) {
  for (const auto& in : generated_inputs()) {
    for (const auto& c : cases()) {
      EXPECT_EQ(run_op(c, in, true).pixels, run_op(c, in, false).pixels) << c.op << " " << c.args;
    }
  }
}

TEST(PointOps, SameBytesFromFourThreadsAtOnce) {
  const Img in = test::noise(97, 64, 3, 21);
  std::vector<Img> serial;
  for (const auto& c : cases()) serial.push_back(run_op(c, in));
  std::vector<std::vector<Img>> parallel(4);
  std::vector<std::thread> threads;
  for (auto& results : parallel) {
    threads.emplace_back([&in, &results] {
      for (const auto& c : cases()) results.push_back(run_op(c, in));
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& results : parallel) {
    for (std::size_t i = 0; i < serial.size(); ++i) EXPECT_EQ(results[i].pixels, serial[i].pixels) << cases()[i].op;
  }
}

TEST(PointOps, ZeroSizeAndOnePixelImages) {
  for (int channels : {1, 3}) {
    Img zero(0, 5, channels);
    for (const auto& c : cases()) EXPECT_NO_THROW(run_op(c, zero)) << c.op;
    Img one(1, 1, channels);
    std::fill(one.pixels.begin(), one.pixels.end(), std::uint8_t{100});
    EXPECT_EQ(run_op({"invert", "", 0}, one).pixels[0], 155);
    EXPECT_EQ(run_op({"autocontrast", "", 0}, one).pixels[0], 100);  // flat: unchanged
    EXPECT_EQ(run_op({"equalize", "", 0}, one).pixels[0], 100);
    EXPECT_EQ(run_op({"adjust_sharpness", "", 3}, one).pixels[0], 100);
  }
}

TEST(PointOps, BadValuesAreRefused) {
  Img a = test::noise(8, 8, 3, 1);
  Img grey = test::noise(8, 8, 1, 1);
  Img five(8, 8, 5);
  EXPECT_THROW(posterize(a.view(), a.mut(), -1), Error);
  EXPECT_THROW(posterize(a.view(), a.mut(), 9), Error);
  EXPECT_THROW(solarize(a.view(), a.mut(), std::nan("")), Error);
  EXPECT_THROW(invert(a.view(), grey.mut()), Error);  // channels differ
  EXPECT_THROW(invert(five.view(), five.mut()), Error);
  std::vector<std::byte> ws(sharpness_workspace_bytes({8, 8}, 3));
  EXPECT_THROW(adjust_sharpness(a.view(), a.mut(), -0.5f, ws), Error);
  EXPECT_THROW(adjust_sharpness(a.view(), a.mut(), std::numeric_limits<float>::infinity(), ws), Error);
}

TEST(PointOps, SharpnessWorkspaceIsTwoRowsAndIsChecked) {
  const Img in = test::noise(40, 30, 3, 4);
  EXPECT_EQ(sharpness_workspace_bytes({40, 30}, 3), 2u * 40 * 3);
  Img out = in;
  std::vector<std::byte> exact(sharpness_workspace_bytes({40, 30}, 3));
  EXPECT_NO_THROW(adjust_sharpness(in.view(), out.mut(), 2.0f, exact));  // ASan: no byte beyond
  std::vector<std::byte> short_by_one(exact.size() - 1);
  EXPECT_THROW(adjust_sharpness(in.view(), out.mut(), 2.0f, short_by_one), Error);
}

}  // namespace
}  // namespace sluice::stages
