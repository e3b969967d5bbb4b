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

// The writer never writes through a link: neither one planted at the path nor one at the old
// fixed temporary name ("w.bin.tmp"); the victim keeps its bytes.
TEST_F(Checkpoint, NeverWritesThroughASymlinkAtThePathOrBesideIt) {
  const std::string victim = (dir_ / "victim").string();
  sluice::test::write_bytes(victim, {1, 2, 3});
  const std::string link = (dir_ / "link.bin").string();
  std::filesystem::create_symlink(victim, link);
  std::filesystem::create_symlink(victim, link + ".tmp");
  try {
    save_weights(rig_.ctx, *model_, link);
    FAIL() << "wrote through a symlink";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  const std::string plain = (dir_ / "plain.bin").string();
  std::filesystem::create_symlink(victim, plain + ".tmp");
  save_weights(rig_.ctx, *model_, plain);
  EXPECT_EQ(sluice::test::read_bytes(victim), (std::vector<std::uint8_t>{1, 2, 3}));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_FALSE(std::filesystem::is_symlink(plain));
  EXPECT_EQ(sluice::test::read_bytes(plain), bytes_);
}

// A file that is not a weights file is never replaced; one that is, is.
TEST_F(Checkpoint, ReplacesOnlyAWeightsFile) {
  const std::string notes = (dir_ / "notes.txt").string();
  sluice::test::write_bytes(notes, {'h', 'i', '\n'});
  try {
    save_weights(rig_.ctx, *model_, notes);
    FAIL() << "replaced a foreign file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not a sluice weights file"), std::string::npos) << e.what();
    EXPECT_THROW(check_weights_output(notes), Error);
  }
  EXPECT_EQ(sluice::test::read_bytes(notes), (std::vector<std::uint8_t>{'h', 'i', '\n'}));
  check_weights_output(path_);
  save_weights(rig_.ctx, *model_, path_);  // over the fixture's own file
  EXPECT_EQ(sluice::test::read_bytes(path_), bytes_);
  // Nothing left beside it: the temporaries are gone.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 2);
}

// A folder that does not exist is found before a run, and the message says why.
TEST_F(Checkpoint, AnUnwritablePathIsFoundBeforeTheRunWithItsReason) {
  const std::string missing = (dir_ / "no-such-folder" / "w.bin").string();
  try {
    check_weights_output(missing);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

// A weights file of version 1 (checksummed with CRC-32) is refused with a message that says so.
TEST_F(Checkpoint, AVersionOneFileIsRefusedClearly) {
  auto b = bytes_;
  b[8] = 1;  // the version
  const Error e = load_damaged(b);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupportedFormat);
  EXPECT_NE(std::string(e.what()).find("CRC-32"), std::string::npos) << e.what();
}

// A FIFO or a device is refused without blocking or reading without end.
TEST_F(Checkpoint, AFifoOrADeviceIsRefused) {
  auto other = make_model(rig_.ctx, "fashion-cnn", 2);
  try {
    load_weights(rig_.ctx, *other, "/dev/zero");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice::train
