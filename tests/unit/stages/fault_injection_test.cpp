// Fault injection into the read stage through its FileOps seam (tests/support/fault_fs.hpp): EIO,
// a file deleted between listing and read, a file truncated or bit-flipped mid-epoch, each
// through stages::read_file and through the fused SampleProgram the workers run, and each must
// come out as a sluice::Error with the right code and the file's path, never a crash or a
// silently wrong sample. Also checks that FaultFs passes untouched calls through unchanged.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fault_fs.hpp"
#include "sluice/core/error.hpp"
#include "stages/source/read_file.hpp"
#include "stages/program/sample_program.hpp"
#include "stages/source/source.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using test::FaultFs;
using test::FsOp;
using Bytes = std::vector<std::uint8_t>;

constexpr Size2 kOut{16, 16};

// The error a call throws; fails the test when it throws nothing or something else.
Error error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a sluice::Error";
  return Error(ErrorCode::kInternal, "nothing thrown");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A program like the one build() makes for read().decode_jpeg().resize(16, 16).batch(n), with
// `ops` as its file system.
SampleProgramConfig program_config(FileOps* ops) {
  SampleProgramConfig config;
  config.geometry.push_back(GeometryStep{spec::Resize{kOut.width, kOut.height, {}}, 1});
  config.normalize = NormalizeOptions{.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  config.output = kOut;
  config.file_ops = ops;
  return config;
}

// A small image folder listed the way a pipeline lists it.
class FaultInjection : public ::testing::Test {
 protected:
  void SetUp() override {
    test::make_image_folder(dir_.path(), 2, 4, 64, 48);
    dataset_ = load_dataset(spec::Folder{dir_.path().string()});
    ASSERT_EQ(dataset_.items.size(), 8);
  }
  std::string path(int i) const { return dataset_.items.path(i); }

  // Runs one item through `program`, returning the sample's bytes.
  Bytes run(const SampleProgram& program, SampleProgram::Workspace& ws, int i, std::int64_t epoch = 0) const {
    Bytes out(program.sample_bytes());
    program.run(dataset_.items, i, SampleKey{epoch, i, 0}, ws, out.data());
    return out;
  }

  test::TempDir dir_;
  Dataset dataset_;
};

TEST_F(FaultInjection, ReadFilePassThroughReadsTheSameBytesAndCountsCalls) {
  FaultFs faults;
  AlignedBuffer real;
  AlignedBuffer through;
  const std::size_t n = read_file(path(0), real, 1 << 20);
  ASSERT_EQ(read_file(path(0), through, 1 << 20, &faults), n);
  EXPECT_EQ(std::memcmp(real.data(), through.data(), n), 0);
  EXPECT_EQ(faults.calls(FsOp::kOpen, path(0)), 1);
  EXPECT_EQ(faults.calls(FsOp::kClose, path(0)), 1);
  EXPECT_GE(faults.calls(FsOp::kPread, path(0)), 1);
  EXPECT_EQ(faults.calls(FsOp::kOpen, path(1)), 0);
  EXPECT_EQ(faults.injected(), 0);
}

TEST_F(FaultInjection, ReadFileEioOnPreadIsIoNamingThePath) {
  FaultFs faults;
  faults.fail(FsOp::kPread, path(2), EIO);
  AlignedBuffer buffer;
  const Error e = error_of([&] { read_file(path(2), buffer, 1 << 20, &faults); });
  EXPECT_EQ(e.code(), ErrorCode::kIo);
  EXPECT_EQ(e.path(), path(2));
  EXPECT_TRUE(contains(e.cause(), std::strerror(EIO))) << e.cause();
  EXPECT_EQ(faults.injected(), 1);
  // Other files, and the same file on the next read, are not affected.
  EXPECT_GT(read_file(path(3), buffer, 1 << 20, &faults), 0u);
  EXPECT_GT(read_file(path(2), buffer, 1 << 20, &faults), 0u);
}

TEST_F(FaultInjection, ReadFileErrnoOnOpenMapsToItsCode) {
  FaultFs faults;
  faults.fail(FsOp::kOpen, path(0), EIO);
  faults.fail(FsOp::kOpen, path(1), ENOENT);
  faults.fail(FsOp::kOpen, path(2), EACCES);
  AlignedBuffer buffer;
  EXPECT_EQ(error_of([&] { read_file(path(0), buffer, 1 << 20, &faults); }).code(), ErrorCode::kIo);
  EXPECT_EQ(error_of([&] { read_file(path(1), buffer, 1 << 20, &faults); }).code(), ErrorCode::kNotFound);
  EXPECT_EQ(error_of([&] { read_file(path(2), buffer, 1 << 20, &faults); }).code(), ErrorCode::kPermissionDenied);
  EXPECT_NO_THROW(file_size(path(1), &faults));  // each rule fired once
  faults.fail(FsOp::kFstat, path(3), EIO);
  EXPECT_EQ(error_of([&] { file_size(path(3), &faults); }).code(), ErrorCode::kIo);
}

TEST_F(FaultInjection, ReadFileFailsOnlyTheNthCall) {
  FaultFs faults;
  faults.fail(FsOp::kOpen, path(0), EIO, /*nth=*/2, /*times=*/2);
  AlignedBuffer buffer;
  EXPECT_NO_THROW(read_file(path(0), buffer, 1 << 20, &faults));
  EXPECT_THROW(read_file(path(0), buffer, 1 << 20, &faults), Error);
  EXPECT_THROW(read_file(path(0), buffer, 1 << 20, &faults), Error);
  EXPECT_NO_THROW(read_file(path(0), buffer, 1 << 20, &faults));
  faults.fail(FsOp::kOpen, FaultFs::kAnyPath, ENOENT, 1, FaultFs::kAlways);
  EXPECT_THROW(read_file(path(5), buffer, 1 << 20, &faults), Error);
  EXPECT_THROW(read_file(path(6), buffer, 1 << 20, &faults), Error);
  faults.clear();
  EXPECT_NO_THROW(read_file(path(6), buffer, 1 << 20, &faults));
  EXPECT_EQ(faults.injected(), 4);
}

TEST_F(FaultInjection, ReadFileSeesTruncatedAndFlippedBytes) {
  AlignedBuffer buffer;
  const Bytes original = test::read_bytes(path(4));
  FaultFs faults;
  faults.truncate_reads(path(4), 100);
  faults.flip_byte(path(4), 7, 0x21);
  ASSERT_EQ(read_file(path(4), buffer, 1 << 20, &faults), 100u);
  for (std::size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(buffer.data()[i], i == 7 ? original[i] ^ 0x21 : original[i]) << i;
  }
  // A fresh buffer asks fstat for the size first, which must agree with the reads.
  AlignedBuffer fresh;
  EXPECT_EQ(read_file(path(4), fresh, 1 << 20, &faults), 100u);
  faults.truncate_reads(path(4), 0);
  const Error e = error_of([&] { read_file(path(4), buffer, 1 << 20, &faults); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_EQ(e.path(), path(4));
}

TEST_F(FaultInjection, SampleProgramPassThroughGivesTheSameSamples) {
  FaultFs faults;
  const SampleProgram real(program_config(nullptr));
  const SampleProgram through(program_config(&faults));
  auto ws_real = real.make_workspace();
  auto ws_through = through.make_workspace();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(run(real, *ws_real, i), run(through, *ws_through, i)) << i;
  EXPECT_EQ(faults.calls(FsOp::kOpen), 8);
  EXPECT_EQ(faults.injected(), 0);
}

TEST_F(FaultInjection, SampleProgramEioMidEpochFailsThatSampleOnlyWithKIo) {
  FaultFs faults;
  const SampleProgram program(program_config(&faults));
  auto ws = program.make_workspace();
  for (int i = 0; i < 8; ++i) run(program, *ws, i);  // warm: buffers sized, nothing pending
  faults.fail(FsOp::kPread, path(3), EIO);
  for (int i = 0; i < 8; ++i) {
    if (i != 3) {
      EXPECT_NO_THROW(run(program, *ws, i, 1)) << i;
      continue;
    }
    const Error e = error_of([&] { run(program, *ws, i, 1); });
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_EQ(e.path(), path(3));
    EXPECT_TRUE(contains(e.what(), path(3))) << e.what();
  }
  // Transient: the next epoch reads the file again and succeeds.
  EXPECT_NO_THROW(run(program, *ws, 3, 2));
}

TEST_F(FaultInjection, SampleProgramFileDeletedAfterListingIsKNotFound) {
  const SampleProgram program(program_config(nullptr));
  auto ws = program.make_workspace();
  run(program, *ws, 5);
  ASSERT_TRUE(fs::remove(path(5)));
  const Error e = error_of([&] { run(program, *ws, 5, 1); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_EQ(e.path(), path(5));
  EXPECT_NO_THROW(run(program, *ws, 6, 1));

  // The same race, injected: the file exists but vanishes just as it is opened.
  FaultFs faults;
  faults.fail(FsOp::kOpen, path(6), ENOENT);
  const SampleProgram injected(program_config(&faults));
  const Error f = error_of([&] { run(injected, *ws, 6, 1); });
  EXPECT_EQ(f.code(), ErrorCode::kNotFound);
  EXPECT_EQ(f.path(), path(6));
}

TEST_F(FaultInjection, SampleProgramFileTruncatedMidEpochIsTruncatedJpeg) {
  FaultFs faults;
  const SampleProgram program(program_config(&faults));
  auto ws = program.make_workspace();
  for (int i = 0; i < 8; ++i) run(program, *ws, i);
  const std::uint64_t size = fs::file_size(path(2));

  faults.truncate_reads(path(2), size / 2);  // cut inside the scan
  Error e = error_of([&] { run(program, *ws, 2, 1); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_EQ(e.path(), path(2));
  EXPECT_TRUE(contains(e.cause(), "truncated JPEG")) << e.cause();

  faults.truncate_reads(path(2), 20);  // cut inside the header
  e = error_of([&] { run(program, *ws, 2, 1); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_EQ(e.path(), path(2));
  EXPECT_TRUE(contains(e.cause(), "truncated JPEG")) << e.cause();
  EXPECT_NO_THROW(run(program, *ws, 1, 1));

  // A real truncation on disk, through the real file system, says the same.
  const SampleProgram real(program_config(nullptr));
  fs::resize_file(path(7), size / 2);
  e = error_of([&] { run(real, *ws, 7, 1); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_EQ(e.path(), path(7));
  EXPECT_TRUE(contains(e.cause(), "truncated JPEG")) << e.cause();
}

TEST_F(FaultInjection, SampleProgramFlippedBytesFailWithThePathOrDecode) {
  FaultFs faults;
  const SampleProgram program(program_config(&faults));
  auto ws = program.make_workspace();
  faults.flip_byte(path(0), 1);  // FF D8 -> FF 27: not a JPEG any more
  const Error e = error_of([&] { run(program, *ws, 0); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupportedFormat);
  EXPECT_EQ(e.path(), path(0));

  // Anywhere else a flip may be harmless, change pixels, or break the data; it must never crash
  // and every failure names the file.
  const std::uint64_t size = fs::file_size(path(1));
  int failed = 0;
  for (std::uint64_t offset = 2; offset < size; offset += 7) {
    faults.clear();
    faults.flip_byte(path(1), offset);
    try {
      run(program, *ws, 1);
    } catch (const Error& error) {
      ++failed;
      EXPECT_EQ(error.path(), path(1));
      EXPECT_NE(error.code(), ErrorCode::kInternal) << offset << ": " << error.what();
    }
  }
  EXPECT_GT(failed, 0);
}

TEST_F(FaultInjection, SharedFaultFsFailsTheSamePathOnEveryWorker) {
  FaultFs faults;
  faults.fail(FsOp::kPread, path(4), EIO, 1, FaultFs::kAlways);
  const SampleProgram program(program_config(&faults));
  constexpr int kWorkers = 4;
  constexpr int kEpochs = 5;
  std::vector<int> failures(kWorkers, 0);
  std::vector<int> wrong(kWorkers, 0);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      auto ws = program.make_workspace();
      Bytes out(program.sample_bytes());
      for (int epoch = 0; epoch < kEpochs; ++epoch) {
        for (int i = 0; i < 8; ++i) {
          try {
            program.run(dataset_.items, i, SampleKey{epoch, i, 0}, *ws, out.data());
          } catch (const Error& e) {
            ++failures[static_cast<std::size_t>(w)];
            if (e.code() != ErrorCode::kIo || e.path() != path(4)) ++wrong[static_cast<std::size_t>(w)];
          }
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(failures[static_cast<std::size_t>(w)], kEpochs) << w;
    EXPECT_EQ(wrong[static_cast<std::size_t>(w)], 0) << w;
  }
  EXPECT_EQ(faults.injected(), kWorkers * kEpochs);
  EXPECT_EQ(faults.calls(FsOp::kOpen), kWorkers * kEpochs * 8);
  EXPECT_EQ(faults.calls(FsOp::kClose), kWorkers * kEpochs * 8);
}

}  // namespace
}  // namespace sluice::stages
