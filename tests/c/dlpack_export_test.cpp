// The DLPack export the C API and the Python module share (src/c/dlpack_export.hpp), alone:
// which memory a batch's data and labels are (the host slot, or the device copy after
// to_device()), DLPack's names for sluice's dtypes and devices, and a managed tensor with
// row-major strides whose deleter, and only it, drops the hold it was given.
#include <gtest/gtest.h>

#include <memory>

#include "c/dlpack_export.hpp"
#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice::dlpack {
namespace {

using test::TempDir;

TEST(DlpackExport, HostBatchesDescribeTheirSlotAndDeviceBatchesTheirCopy) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 8);
  for (bool ring : {false, true}) {
    Pipeline p = Pipeline::from_items(items).read().decode_jpeg().resize(6, 4).batch(4);
    if (ring) p.to_device(host(), {.stage_through_ring = true});
    Loader loader = p.build({.threads = 1});
    for (Batch& b : loader.epoch(0)) {
      ASSERT_EQ(b.on_device(), ring);
      const TensorDesc data = describe(b, BatchPart::kData);
      const TensorDesc labels = describe(b, BatchPart::kLabels);
      EXPECT_EQ(data.data, ring ? b.device_data().data : b.data().data);
      EXPECT_NE(data.data, ring ? b.data().data : nullptr);
      EXPECT_EQ(data.shape, (Shape{4, 4, 6, 3}));
      EXPECT_EQ(data.dtype, DType::kU8);
      EXPECT_EQ(labels.data, ring ? static_cast<const void*>(b.device_labels()) : b.labels().data());
      EXPECT_EQ(labels.shape, (Shape{4}));
      EXPECT_EQ(labels.dtype, DType::kI32);
      EXPECT_EQ(data.device, host());
    }
  }
}

// mixup() / cutmix(): the labels C and Python receive are the soft labels, f32 (N, num_classes).
TEST(DlpackExport, MixedBatchesExportTheirSoftLabelsAsTheLabels) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 8);
  Loader loader = Pipeline::from_items(items).read().decode_jpeg().resize(6, 4).normalize().batch(4).cutmix(1.0, 8).build({.threads = 1});
  int batches = 0;
  for (Batch& b : loader.epoch(0)) {
    const TensorDesc labels = describe(b, BatchPart::kLabels);
    EXPECT_EQ(labels.data, b.soft_labels().data);
    EXPECT_NE(labels.data, nullptr);
    EXPECT_EQ(labels.shape, (Shape{4, 8}));
    EXPECT_EQ(labels.dtype, DType::kF32);
    const auto* rows = static_cast<const float*>(labels.data);
    for (int i = 0; i < 4; ++i) {
      float sum = 0;
      for (int k = 0; k < 8; ++k) sum += rows[i * 8 + k];
      EXPECT_NEAR(sum, 1.0f, 1e-6f);
    }
    ++batches;
  }
  EXPECT_EQ(batches, 2);
}

TEST(DlpackExport, DtypesAndDevicesInDlpacksTerms) {
  EXPECT_EQ(dl_dtype(DType::kU8).code, kDLUInt);
  EXPECT_EQ(dl_dtype(DType::kI32).code, kDLInt);
  EXPECT_EQ(dl_dtype(DType::kI32).bits, 32);
  EXPECT_EQ(dl_dtype(DType::kF16).code, kDLFloat);
  EXPECT_EQ(dl_dtype(DType::kF16).bits, 16);
  EXPECT_EQ(dl_dtype(DType::kBF16).code, kDLBfloat);
  EXPECT_EQ(dl_dtype(DType::kF32).bits, 32);
  EXPECT_EQ(dl_dtype(DType::kF32).lanes, 1);
  EXPECT_EQ(dl_device(host()).device_type, kDLCPU);
  EXPECT_EQ(dl_device(cuda(1)).device_type, kDLCUDA);
  EXPECT_EQ(dl_device(cuda(1)).device_id, 1);
}

TEST(DlpackExport, AManagedTensorHasRowMajorStridesAndItsDeleterDropsTheHold) {
  std::uint16_t storage[2 * 3 * 5] = {};
  auto owner = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owner;
  DLManagedTensor* t = export_tensor(TensorDesc{storage, DType::kBF16, Shape{2, 3, 5}, host()}, owner);
  owner.reset();
  EXPECT_FALSE(watch.expired()) << "the tensor holds what it was given";
  EXPECT_EQ(t->dl_tensor.data, storage);
  EXPECT_EQ(t->dl_tensor.ndim, 3);
  EXPECT_EQ(t->dl_tensor.shape[0], 2);
  EXPECT_EQ(t->dl_tensor.shape[2], 5);
  EXPECT_EQ(t->dl_tensor.strides[0], 15);
  EXPECT_EQ(t->dl_tensor.strides[1], 5);
  EXPECT_EQ(t->dl_tensor.strides[2], 1);
  EXPECT_EQ(t->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(t->dl_tensor.dtype.code, kDLBfloat);
  EXPECT_EQ(t->dl_tensor.device.device_type, kDLCPU);
  t->deleter(t);
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace sluice::dlpack
