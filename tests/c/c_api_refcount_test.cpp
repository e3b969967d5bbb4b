// The C API's holds, checked in C++ on images whose pixels encode their index: DLPack tensors
// keep their batch's slot (and their loader) alive in any release order; guard() turns every
// exception into a status and a per-thread message; option and info structs of other sizes
// (callers built against older or newer headers) are read and written only as far as they go.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <new>
#include <stdexcept>
#include <thread>

#include "c/c_api_internal.hpp"
#include "pipeline_support.hpp"
#include "sluice/c/sluice.h"
#include "sluice/pipeline/json_spec.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

class CApiHolds : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    items_ = new std::vector<Item>(test::make_coded_items(dir_->path(), 60));
  }
  static void TearDownTestSuite() {
    delete items_;
    delete dir_;
  }

  // u8 NHWC batches of 4, one batch prepared ahead, 2 threads.
  static sluice_loader_t* make_loader(int batch = 4) {
    const std::string spec = to_json(Pipeline::from_items(*items_).read().decode_jpeg().batch(batch).prefetch(1).spec(),
                                     {.threads = 2});
    sluice_loader_t* loader = nullptr;
    EXPECT_EQ(sluice_loader_create_from_json(spec.c_str(), nullptr, &loader), SLUICE_OK) << sluice_last_error();
    EXPECT_EQ(sluice_loader_start_epoch(loader, 0), SLUICE_OK);
    return loader;
  }

  // Every sample of a held data tensor still shows the item its label names.
  static void expect_intact(const DLManagedTensor* data, const std::int32_t* lb) {
    const DLTensor& t = data->dl_tensor;
    ASSERT_EQ(t.ndim, 4);
    const auto* px = static_cast<const std::uint8_t*>(t.data);
    for (std::int64_t i = 0; i < t.shape[0]; ++i) {
      const std::int64_t centre = i * t.strides[0] + (t.shape[1] / 2) * t.strides[1] + (t.shape[2] / 2) * t.strides[2];
      EXPECT_EQ(test::index_of_colour(px + centre), lb[i]) << "sample " << i;
    }
  }

  static void expect_intact(const DLManagedTensor* data, const DLManagedTensor* labels) {
    expect_intact(data, static_cast<const std::int32_t*>(labels->dl_tensor.data));
  }

  static inline TempDir* dir_ = nullptr;
  static inline std::vector<Item>* items_ = nullptr;
};

TEST_F(CApiHolds, TensorsKeepTheirSlotsWhileTheEpochRunsOn_Prefetch1_2Threads) {
  sluice_loader_t* loader = make_loader();
  std::vector<DLManagedTensor*> data;
  std::vector<DLManagedTensor*> labels;
  sluice_batch_t* batch = nullptr;
  // Hold the first two batches through their tensors only, while the other 13 pass through the
  // one slot left (prefetch 1: a ring of 3; holding all 3 would stop production, by design).
  for (int b = 0; b < 15; ++b) {
    ASSERT_EQ(sluice_loader_next(loader, &batch), SLUICE_OK) << sluice_last_error();
    if (b < 2) {
      DLManagedTensor* d = nullptr;
      DLManagedTensor* l = nullptr;
      ASSERT_EQ(sluice_batch_data(batch, &d), SLUICE_OK);
      ASSERT_EQ(sluice_batch_labels(batch, &l), SLUICE_OK);
      DLManagedTensor* extra = nullptr;  // a second hold on the same batch, dropped at once
      ASSERT_EQ(sluice_batch_data(batch, &extra), SLUICE_OK);
      extra->deleter(extra);
      data.push_back(d);
      labels.push_back(l);
    }
    sluice_batch_release(batch);
  }
  EXPECT_EQ(sluice_loader_next(loader, &batch), SLUICE_END);
  for (std::size_t b = 0; b < data.size(); ++b) {
    expect_intact(data[b], labels[b]);
    EXPECT_EQ(static_cast<const std::int32_t*>(labels[b]->dl_tensor.data)[0], static_cast<std::int32_t>(4 * b));
    const auto* lb = static_cast<const std::int32_t*>(labels[b]->dl_tensor.data);
    const std::vector<std::int32_t> kept(lb, lb + labels[b]->dl_tensor.shape[0]);
    labels[b]->deleter(labels[b]);  // labels first: the data tensor alone still holds the slot
    expect_intact(data[b], kept.data());
    data[b]->deleter(data[b]);
  }
  // Every slot came back: another whole epoch runs.
  ASSERT_EQ(sluice_loader_start_epoch(loader, 1), SLUICE_OK);
  int batches = 0;
  while (sluice_loader_next(loader, &batch) == SLUICE_OK) {
    ++batches;
    sluice_batch_release(batch);
  }
  EXPECT_EQ(batches, 15);
  sluice_loader_destroy(loader);
}

TEST_F(CApiHolds, BatchesAndTensorsOutliveTheirLoader) {
  sluice_loader_t* loader = make_loader();
  sluice_batch_t* first = nullptr;
  sluice_batch_t* second = nullptr;
  ASSERT_EQ(sluice_loader_next(loader, &first), SLUICE_OK);
  ASSERT_EQ(sluice_loader_next(loader, &second), SLUICE_OK);
  DLManagedTensor* data = nullptr;
  DLManagedTensor* labels = nullptr;
  ASSERT_EQ(sluice_batch_data(first, &data), SLUICE_OK);
  ASSERT_EQ(sluice_batch_labels(first, &labels), SLUICE_OK);
  sluice_loader_destroy(loader);  // mid-epoch, two batches out
  sluice_batch_release(first);
  expect_intact(data, labels);
  sluice_batch_info_t info = SLUICE_BATCH_INFO_INIT;
  ASSERT_EQ(sluice_batch_info(second, &info), SLUICE_OK);
  EXPECT_EQ(info.index, 1);
  data->deleter(data);
  sluice_batch_release(second);
  labels->deleter(labels);  // the last hold: the pipeline stops here
}

TEST(CApiGuard, EveryExceptionBecomesAStatusAndAMessage) {
  using c_api::guard;
  EXPECT_EQ(guard([]() -> sluice_status_t { throw Error(ErrorCode::kTooLarge, "too big", "a.jpg"); }),
            SLUICE_TOO_LARGE);
  EXPECT_STREQ(sluice_last_error(), "a.jpg: too big");
  EXPECT_EQ(guard([]() -> sluice_status_t { throw Error(ErrorCode::kOutOfBudget, "raise it"); }), SLUICE_OUT_OF_BUDGET);
  EXPECT_EQ(guard([]() -> sluice_status_t { throw std::bad_alloc(); }), SLUICE_OUT_OF_MEMORY);
  EXPECT_STREQ(sluice_last_error(), "out of memory");
  EXPECT_EQ(guard([]() -> sluice_status_t { throw std::runtime_error("boom"); }), SLUICE_INTERNAL);
  EXPECT_STREQ(sluice_last_error(), "boom");
  EXPECT_EQ(guard([]() -> sluice_status_t { throw 42; }), SLUICE_INTERNAL);
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kPermissionDenied,
                         ErrorCode::kIo, ErrorCode::kCorruptData, ErrorCode::kUnsupportedFormat, ErrorCode::kTooLarge,
                         ErrorCode::kOutOfBudget, ErrorCode::kCancelled, ErrorCode::kInternal}) {
    const sluice_status_t status = c_api::status_of(code);
    EXPECT_LT(status, 0);
    EXPECT_EQ(std::string(sluice_status_string(status)), std::string(to_string(code)));
  }
}

TEST(CApiGuard, LastErrorIsPerThread) {
  sluice_loader_t* loader = nullptr;
  ASSERT_EQ(sluice_loader_create_from_json("{", nullptr, &loader), SLUICE_INVALID_ARGUMENT);
  const std::string here = sluice_last_error();
  EXPECT_EQ(here.rfind("not valid JSON", 0), 0u) << here;
  std::string there = "unset";
  std::thread([&there] { there = sluice_last_error(); }).join();
  EXPECT_EQ(there, "");
  EXPECT_EQ(sluice_last_error(), here);
}

TEST_F(CApiHolds, StructsOfOtherSizesReadAndWrittenOnlyAsFarAsTheyGo) {
  // A caller built when the options ended before `threads`: what follows is not its memory.
  struct alignas(sluice_loader_options_t) {
    unsigned char bytes[sizeof(sluice_loader_options_t)];
  } old_caller;
  std::memset(old_caller.bytes, 0xA5, sizeof old_caller.bytes);
  auto* options = reinterpret_cast<sluice_loader_options_t*>(old_caller.bytes);
  options->struct_size = offsetof(sluice_loader_options_t, threads);
  options->base_dir = nullptr;
  const std::string spec = to_json(Pipeline::from_items(*items_).read().decode_jpeg().batch(4).spec(), {.threads = 2});
  sluice_loader_t* loader = nullptr;
  ASSERT_EQ(sluice_loader_create_from_json(spec.c_str(), options, &loader), SLUICE_OK) << sluice_last_error();
  const char* stats = nullptr;
  ASSERT_EQ(sluice_loader_stats_json(loader, &stats), SLUICE_OK);
  EXPECT_NE(std::string(stats).find("\"threads\":2"), std::string::npos) << stats;

  // A caller whose info struct ends before `dtype`: nothing past it is written.
  sluice_loader_info_t info;
  std::memset(&info, 0x5A, sizeof info);
  info.struct_size = offsetof(sluice_loader_info_t, dtype);
  ASSERT_EQ(sluice_loader_info(loader, &info), SLUICE_OK);
  EXPECT_EQ(info.samples_per_epoch, 60);
  EXPECT_EQ(info.shape[0], 4);
  EXPECT_EQ(info.dtype.code, 0x5A);
  EXPECT_EQ(info.struct_size, offsetof(sluice_loader_info_t, dtype));
  sluice_loader_destroy(loader);
}

// The stop callback reaches build()'s wait on the network: a shard whose server refuses every
// connection would be retried with backoff for seconds; a callback saying stop ends the create
// call at once with SLUICE_CANCELLED, having been asked on the creating thread.
TEST(CApiStop, TheStopCallbackEndsACreateWaitingOnTheNetwork) {
  const TempDir dir;
  const std::string spec = R"({"source": {"shards": {"path": "http://127.0.0.1:1/train-000000.tar", "remote": {"cache_dir": ")" +
                           (dir / "cache").string() +
                           R"(", "retries": 6}}}, "stages": ["read", "decode_jpeg", {"center_crop": {"size": 8}}, {"batch": {"size": 2}}]})";
  struct Asked {
    int calls = 0;
    std::thread::id thread;
  } asked;
  sluice_loader_options_t options = SLUICE_LOADER_OPTIONS_INIT;
  options.stop = [](void* user) {
    auto* a = static_cast<Asked*>(user);
    ++a->calls;
    a->thread = std::this_thread::get_id();
    return 1;
  };
  options.stop_user = &asked;
  sluice_loader_t* loader = nullptr;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(sluice_loader_create_from_json(spec.c_str(), &options, &loader), SLUICE_CANCELLED) << sluice_last_error();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 2.0);
  EXPECT_EQ(loader, nullptr);
  EXPECT_GE(asked.calls, 1);
  EXPECT_EQ(asked.thread, std::this_thread::get_id());
}

}  // namespace
}  // namespace sluice
