// Weights files: a round trip restores every parameter and buffer exactly; each kind of damage
// (bad magic, other version, truncation, trailing bytes, flipped bits, another model's file) is
// a sluice::Error that names the file and the problem, and leaves the model's weights alone.
#include <gtest/gtest.h>

#include <filesystem>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/weights_file.hpp"
#include "sluice/train/models.hpp"
#include "test_support.hpp"

namespace sluice::train {
namespace {

using test::HostRig;
using test::values_of;

std::vector<std::vector<float>> snapshot(Context& ctx, Sequential& m) {
  std::vector<std::vector<float>> all;
  for (const Parameter& p : m.parameters()) all.push_back(values_of(ctx, *p.value));
  for (const Buffer& b : m.buffers()) all.push_back(values_of(ctx, *b.value));
  return all;
}

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("sluice_ckpt_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "w.bin").string();
    model_ = make_model(rig_.ctx, "fashion-cnn", 1);
    // Running statistics that differ from their initial values.
    std::vector<float> stats(32, 0.25f);
    ops::copy_from_host(rig_.ctx, stats.data(), *model_->buffers()[0].value);
    save_weights(rig_.ctx, *model_, path_);
    bytes_ = sluice::test::read_bytes(path_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Loads `bytes` into a freshly initialised model (seed 2) and returns the error.
  Error load_damaged(const std::vector<std::uint8_t>& bytes) {
    sluice::test::write_bytes(path_, bytes);
    auto other = make_model(rig_.ctx, "fashion-cnn", 2);
    const auto before = snapshot(rig_.ctx, *other);
    try {
      load_weights(rig_.ctx, *other, path_);
    } catch (const Error& e) {
      EXPECT_EQ(snapshot(rig_.ctx, *other), before) << "a failed load changed weights";
      EXPECT_EQ(e.path(), path_);
      return e;
    }
    ADD_FAILURE() << "the damaged file loaded";
    return Error(ErrorCode::kInternal, "no error");
  }

  HostRig rig_;
  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<Sequential> model_;
  std::vector<std::uint8_t> bytes_;
};

TEST_F(Checkpoint, RoundTripRestoresParametersAndBuffers) {
  auto other = make_model(rig_.ctx, "fashion-cnn", 2);
  ASSERT_NE(snapshot(rig_.ctx, *other), snapshot(rig_.ctx, *model_));
  load_weights(rig_.ctx, *other, path_);
  EXPECT_EQ(snapshot(rig_.ctx, *other), snapshot(rig_.ctx, *model_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST_F(Checkpoint, BadMagic) {
  auto b = bytes_;
  b[0] = 'X';
  const Error e = load_damaged(b);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupportedFormat);
  EXPECT_NE(std::string(e.what()).find("bad magic"), std::string::npos) << e.what();
}

TEST_F(Checkpoint, OtherVersion) {
  auto b = bytes_;
  b[8] = 7;
  const Error e = load_damaged(b);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupportedFormat);
  EXPECT_NE(std::string(e.what()).find("version 7"), std::string::npos) << e.what();
}

TEST_F(Checkpoint, TruncatedHeader) {
  const Error e = load_damaged(std::vector<std::uint8_t>(bytes_.begin(), bytes_.begin() + 20));
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
}

TEST_F(Checkpoint, TruncatedBlob) {
  const Error e = load_damaged(std::vector<std::uint8_t>(bytes_.begin(), bytes_.end() - 100));
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
}

TEST_F(Checkpoint, TrailingBytes) {
  auto b = bytes_;
  b.push_back(0);
  const Error e = load_damaged(b);
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("after its blob"), std::string::npos) << e.what();
}

TEST_F(Checkpoint, ChecksumMismatchInBlobAndTable) {
  auto b = bytes_;
  b[b.size() / 2] ^= 0x10;  // a weight's bit
  Error e = load_damaged(b);
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  b = bytes_;
  b[kWeightsHeaderBytes + 3] ^= 0x01;  // a name in the table
  e = load_damaged(b);
  EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
}

TEST_F(Checkpoint, AnotherModelsFile) {
  auto cifar = make_model(rig_.ctx, "cifar10-separable", 1);
  const auto before = snapshot(rig_.ctx, *cifar);
  try {
    load_weights(rig_.ctx, *cifar, path_);
    FAIL() << "loaded fashion-cnn weights into cifar10-separable";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  EXPECT_EQ(snapshot(rig_.ctx, *cifar), before);
}

TEST_F(Checkpoint, MissingFile) {
  auto other = make_model(rig_.ctx, "fashion-cnn", 2);
  try {
    load_weights(rig_.ctx, *other, (dir_ / "absent.bin").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(Crc32, MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32("", 0), 0u);
}

}  // namespace
}  // namespace sluice::train
