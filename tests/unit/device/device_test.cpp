// Devices, streams, events and copies on the host backend, which always runs: naming, the clear
// error for a CUDA device this machine or build cannot drive, and the synchronous semantics of
// host streams and events (recorded means complete, waits are no-ops, elapsed time is host time).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/detail/device/copy.hpp"
#include "sluice/device/device.hpp"
#include "sluice/detail/device/device_pool.hpp"
#include "sluice/detail/device/numa.hpp"
#include "sluice/detail/device/pinned.hpp"
#include "sluice/device/stream.hpp"
#include "sluice/detail/device/transfer_ring.hpp"

namespace sluice {
namespace {

// Expects `call` to throw sluice::Error(kInvalidArgument) whose message names the device and
// says what to do instead.
template <class F>
void expect_unusable_cuda(F&& call) {
  try {
    call();
    FAIL() << "expected sluice::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("sluice::cuda(0)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sluice::host()"), std::string::npos) << e.what();
  }
}

TEST(DeviceId, HostAndCudaNamesAndEquality) {
  EXPECT_TRUE(host().is_host());
  EXPECT_TRUE(cuda(1).is_cuda());
  EXPECT_EQ(cuda(1).index, 1);
  EXPECT_EQ(cuda(), cuda(0));
  EXPECT_NE(cuda(0), host());
  EXPECT_EQ(to_string(host()), "host");
  EXPECT_EQ(to_string(cuda(3)), "cuda:3");
}

TEST(DeviceId, CudaDeviceCountNeverThrowsAndIsStable) {
  const int first = cuda_device_count();
  EXPECT_GE(first, 0);
  EXPECT_EQ(cuda_device_count(), first);
  if (first == 0) {
    EXPECT_FALSE(cuda_unavailable_reason().empty());
  } else {
    EXPECT_TRUE(cuda_unavailable_reason().empty());
  }
  if (!cuda_backend_built()) {
    EXPECT_EQ(first, 0);
  }
}

TEST(DeviceId, CudaWithoutAUsableGpuIsAClearErrorFromEveryEntryPoint) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present; tests/gpu covers it";
  expect_unusable_cuda([] { require_device(cuda(0)); });
  expect_unusable_cuda([] { (void)describe(cuda(0)); });
  expect_unusable_cuda([] { Stream s(cuda(0)); });
  expect_unusable_cuda([] { (void)Stream::wrap(cuda(0), nullptr); });
  expect_unusable_cuda([] { Event e(cuda(0)); });
  expect_unusable_cuda([] { PinnedBuffer b(cuda(0), 4096); });
  expect_unusable_cuda([] { (void)make_caching_pool(cuda(0)); });
  expect_unusable_cuda([] { copy_to_device(cuda(0), nullptr, nullptr, 0); });
  expect_unusable_cuda([] {
    TransferRing ring({.device = cuda(0), .slots = 2, .host_slot_bytes = 1024});
  });
  EXPECT_EQ(numa_node_of(cuda(0)), -1);  // a query, not an error
}

TEST(DeviceId, NegativeOrMissingCudaIndexIsAnError) {
  EXPECT_THROW(require_device(cuda(-1)), Error);
  const int count = cuda_device_count();
  if (count == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  try {
    require_device(cuda(count));
    FAIL() << "expected sluice::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no such device"), std::string::npos) << e.what();
  }
}

TEST(DeviceId, DescribeHost) {
  const DeviceInfo info = describe(host());
  EXPECT_EQ(info.id, host());
  EXPECT_EQ(info.name, "host");
  EXPECT_GT(info.total_memory, 0u);
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_EQ(info.numa_node, -1);
  EXPECT_TRUE(info.pci_bus_id.empty());
}

TEST(HostStream, WaitSynchronizeAndQueryAreImmediate) {
  Stream stream;  // default: a host stream
  EXPECT_EQ(stream.device(), host());
  EXPECT_EQ(stream.native_handle(), nullptr);
  EXPECT_TRUE(stream.query());
  Event event;
  stream.wait(event);  // never recorded: complete, nothing to wait for
  stream.synchronize();
  Stream created(host(), {.non_blocking = false, .priority = -5});
  EXPECT_TRUE(created.query());
  int dummy = 0;
  Stream wrapped = Stream::wrap(host(), &dummy);
  EXPECT_EQ(wrapped.native_handle(), nullptr);  // host streams have no native handle
}

TEST(HostEvent, CompleteBeforeAndAfterRecording) {
  Stream stream(host());
  Event event(host());
  EXPECT_FALSE(event.recorded());
  EXPECT_TRUE(event.query());
  event.synchronize();
  event.record(stream);
  EXPECT_TRUE(event.recorded());
  EXPECT_TRUE(event.query());
  event.synchronize();
  stream.wait(event);
}

TEST(HostEvent, ElapsedIsHostTimeBetweenRecords) {
  Stream stream;
  Event start(host(), {.timing = true});
  Event end(host(), {.timing = true});
  start.record(stream);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  end.record(stream);
  const float ms = Event::elapsed_ms(start, end);
  EXPECT_GE(ms, 19.0f);
  EXPECT_LT(ms, 5000.0f);
}

TEST(HostEvent, ElapsedNeedsBothRecorded) {
  Stream stream;
  Event start(host());
  Event end(host());
  start.record(stream);
  EXPECT_THROW((void)Event::elapsed_ms(start, end), Error);
}

TEST(HostEvent, MovedEventKeepsItsRecord) {
  Stream stream;
  Event a(host());
  a.record(stream);
  Event b(std::move(a));
  EXPECT_TRUE(b.recorded());
  EXPECT_FALSE(a.recorded());  // NOLINT(bugprone-use-after-move): moved-from is empty
  Stream moved(std::move(stream));
  EXPECT_EQ(moved.device(), host());
}

TEST(HostCopy, AsyncCopiesAreDoneWhenTheCallReturns) {
  std::vector<std::uint8_t> src(10'000);
  std::iota(src.begin(), src.end(), std::uint8_t{7});
  std::vector<std::uint8_t> dst(src.size(), 0);
  std::vector<std::uint8_t> back(src.size(), 0);
  Stream stream;
  Event done(host());
  copy_to_device_async(dst.data(), src.data(), src.size(), stream, &done);
  EXPECT_TRUE(done.recorded());
  EXPECT_TRUE(done.query());
  EXPECT_EQ(dst, src);
  copy_to_host_async(back.data(), dst.data(), dst.size(), stream);
  EXPECT_EQ(back, src);
  std::vector<std::uint8_t> sync(src.size(), 0);
  copy_to_device(host(), sync.data(), src.data(), src.size());
  EXPECT_EQ(sync, src);
  copy_to_host(host(), sync.data(), nullptr, 0);  // zero bytes: no access
}

}  // namespace
}  // namespace sluice
