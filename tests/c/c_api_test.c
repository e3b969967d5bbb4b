/* The C API from C99 (include/sluice/c/sluice.h only): a loader built from a JSON spec over
 * cifar10/test iterates an epoch whose DLPack tensors have the right shapes, strides, dtypes and
 * labels; u8/f16/bf16 and NHWC come out right; a tensor keeps its batch's slot from being
 * recycled while the loader runs on past it (and past the loader's destruction); bad specs,
 * missing folders, misuse and corrupt files give the right status and a message.
 *
 * Usage: c_api_test SCRATCH_DIR. Exits 77 (skip) when the shared datasets are absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/c/sluice.h"

static int failures = 0;

#define CHECK(cond)                                                                       \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              sluice_last_error());                                                       \
      ++failures;                                                                         \
    }                                                                                     \
  } while (0)

#define REQUIRE(cond)                                                                     \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              sluice_last_error());                                                       \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

#define CIFAR_SAMPLES 10000
#define CIFAR_CLASSES 10

static char cifar_dir[1100];
static char datasets_dir[1024];

static int file_exists(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return 0;
  fclose(f);
  return 1;
}

/* A spec over cifar10/test: decode, normalize to `dtype` in `layout`, batch, prefetch. */
static void cifar_spec(char* out, size_t size, const char* dtype, const char* layout, int batch, const char* extra) {
  const char* mean = strcmp(dtype, "u8") == 0 ? "[]" : "[0.5, 0.5, 0.5]";
  const char* std = strcmp(dtype, "u8") == 0 ? "[]" : "[0.25, 0.25, 0.25]";
  snprintf(out, size,
           "{\"source\": {\"folder\": \"%s\"},"
           " \"stages\": [\"read\", \"decode_jpeg\","
           "  {\"normalize\": {\"mean\": %s, \"std\": %s, \"layout\": \"%s\", \"dtype\": \"%s\"}},"
           "  {\"batch\": {\"size\": %d}}, {\"prefetch\": {\"depth\": 1}}%s],"
           " \"build\": {\"threads\": 2, \"seed\": 1}}",
           cifar_dir, mean, std, layout, dtype, batch, extra);
}

static sluice_loader_t* make_loader(const char* dtype, const char* layout, int batch, const char* extra) {
  char spec[4096];
  sluice_loader_t* loader = NULL;
  cifar_spec(spec, sizeof spec, dtype, layout, batch, extra);
  REQUIRE(sluice_loader_create_from_json(spec, NULL, &loader) == SLUICE_OK);
  REQUIRE(loader != NULL);
  return loader;
}

static void check_strides(const DLTensor* t) {
  int64_t expected = 1;
  int i;
  for (i = t->ndim - 1; i >= 0; --i) {
    CHECK(t->strides[i] == expected);
    expected *= t->shape[i];
  }
}

static size_t tensor_bytes(const DLTensor* t) {
  size_t n = (size_t)(t->dtype.bits / 8);
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

/* One epoch of f32 NCHW: shapes, strides, dtype, value range, and labels in folder order. */
static void test_epoch_f32_nchw(void) {
  sluice_loader_t* loader = make_loader("f32", "nchw", 256, "");
  sluice_loader_info_t info = SLUICE_LOADER_INFO_INIT;
  sluice_batch_t* batch = NULL;
  sluice_status_t st;
  int64_t samples = 0, batches = 0, per_class[CIFAR_CLASSES] = {0};
  int32_t last_label = 0;
  const char* stats = NULL;
  int c;

  REQUIRE(sluice_loader_info(loader, &info) == SLUICE_OK);
  CHECK(info.samples_per_epoch == CIFAR_SAMPLES);
  CHECK(info.batches_per_epoch == 40);
  CHECK(info.ndim == 4);
  CHECK(info.shape[0] == 256 && info.shape[1] == 3 && info.shape[2] == 32 && info.shape[3] == 32);
  CHECK(info.dtype.code == kDLFloat && info.dtype.bits == 32 && info.dtype.lanes == 1);
  CHECK(info.device.device_type == kDLCPU);

  REQUIRE(sluice_loader_start_epoch(loader, 0) == SLUICE_OK);
  while ((st = sluice_loader_next(loader, &batch)) == SLUICE_OK) {
    DLManagedTensor* data = NULL;
    DLManagedTensor* labels = NULL;
    sluice_batch_info_t binfo = SLUICE_BATCH_INFO_INIT;
    const float* px;
    const int32_t* lb;
    int64_t i, n;

    REQUIRE(sluice_batch_info(batch, &binfo) == SLUICE_OK);
    CHECK(binfo.epoch == 0 && binfo.index == batches);
    /* A host batch: nothing to order on any stream. */
    CHECK(sluice_batch_use_on_stream(batch, NULL) == SLUICE_OK);
    REQUIRE(sluice_batch_data(batch, &data) == SLUICE_OK);
    REQUIRE(sluice_batch_labels(batch, &labels) == SLUICE_OK);
    n = binfo.size;
    CHECK(n == (batches < 39 ? 256 : CIFAR_SAMPLES - 39 * 256));
    CHECK(data->dl_tensor.ndim == 4);
    CHECK(data->dl_tensor.shape[0] == n && data->dl_tensor.shape[1] == 3 && data->dl_tensor.shape[2] == 32 &&
          data->dl_tensor.shape[3] == 32);
    check_strides(&data->dl_tensor);
    CHECK(data->dl_tensor.dtype.code == kDLFloat && data->dl_tensor.dtype.bits == 32);
    CHECK(data->dl_tensor.device.device_type == kDLCPU);
    CHECK(data->dl_tensor.byte_offset == 0);
    CHECK(labels->dl_tensor.ndim == 1 && labels->dl_tensor.shape[0] == n && labels->dl_tensor.strides[0] == 1);
    CHECK(labels->dl_tensor.dtype.code == kDLInt && labels->dl_tensor.dtype.bits == 32);

    /* (x / 255 - 0.5) / 0.25 lies in [-2, 2]. */
    px = (const float*)data->dl_tensor.data;
    for (i = 0; i < n * 3 * 32 * 32; i += 97) CHECK(px[i] >= -2.0001f && px[i] <= 2.0001f);
    /* Folder order without shuffling: classes in sorted order, labels never go down. */
    lb = (const int32_t*)labels->dl_tensor.data;
    for (i = 0; i < n; ++i) {
      CHECK(lb[i] >= 0 && lb[i] < CIFAR_CLASSES);
      CHECK(lb[i] >= last_label);
      if (lb[i] >= 0 && lb[i] < CIFAR_CLASSES) ++per_class[lb[i]];
      last_label = lb[i];
    }
    samples += n;
    ++batches;
    /* Any order of release: the tensors before the handle here, the other way below. */
    data->deleter(data);
    labels->deleter(labels);
    sluice_batch_release(batch);
  }
  CHECK(st == SLUICE_END);
  CHECK(batch == NULL);
  CHECK(samples == CIFAR_SAMPLES);
  CHECK(batches == 40);
  for (c = 0; c < CIFAR_CLASSES; ++c) CHECK(per_class[c] == CIFAR_SAMPLES / CIFAR_CLASSES);

  /* Past the end it stays at the end. */
  CHECK(sluice_loader_next(loader, &batch) == SLUICE_END);
  CHECK(sluice_loader_next(loader, &batch) == SLUICE_END);
  CHECK(batch == NULL);

  REQUIRE(sluice_loader_stats_json(loader, &stats) == SLUICE_OK);
  CHECK(strstr(stats, "\"batches\":40") != NULL);
  CHECK(strstr(stats, "\"samples\":10000") != NULL);
  sluice_loader_destroy(loader);
}

/* The first batch of a loader: its data tensor's shape, strides and dtype. */
static void check_first_batch(const char* dtype, const char* layout, uint8_t code, uint8_t bits, int nhwc) {
  sluice_loader_t* loader = make_loader(dtype, layout, 16, "");
  sluice_batch_t* batch = NULL;
  DLManagedTensor* data = NULL;
  const int64_t* s;

  REQUIRE(sluice_loader_start_epoch(loader, 0) == SLUICE_OK);
  REQUIRE(sluice_loader_next(loader, &batch) == SLUICE_OK);
  REQUIRE(sluice_batch_data(batch, &data) == SLUICE_OK);
  sluice_batch_release(batch); /* the handle first: the tensor alone keeps the slot */
  s = data->dl_tensor.shape;
  CHECK(data->dl_tensor.ndim == 4);
  if (nhwc) {
    CHECK(s[0] == 16 && s[1] == 32 && s[2] == 32 && s[3] == 3);
  } else {
    CHECK(s[0] == 16 && s[1] == 3 && s[2] == 32 && s[3] == 32);
  }
  check_strides(&data->dl_tensor);
  CHECK(data->dl_tensor.dtype.code == code && data->dl_tensor.dtype.bits == bits && data->dl_tensor.dtype.lanes == 1);
  data->deleter(data);
  sluice_loader_destroy(loader); /* mid-epoch: abandons the rest */
}

/* A tensor held while the loader goes on: its slot must not be refilled. prefetch(1) gives the
 * ring 3 slots (at most 10 when tuned); the tensor is held across 12 more batches. */
static void test_held_tensor_keeps_its_slot(void) {
  sluice_loader_t* loader = make_loader("u8", "nhwc", 100, "");
  sluice_batch_t* batch = NULL;
  DLManagedTensor* held = NULL;
  DLManagedTensor* held_labels = NULL;
  unsigned char* copy;
  size_t bytes;
  int i, differs = 0;
  int64_t rest = 0;

  REQUIRE(sluice_loader_start_epoch(loader, 0) == SLUICE_OK);
  REQUIRE(sluice_loader_next(loader, &batch) == SLUICE_OK);
  REQUIRE(sluice_batch_data(batch, &held) == SLUICE_OK);
  REQUIRE(sluice_batch_labels(batch, &held_labels) == SLUICE_OK);
  sluice_batch_release(batch);
  bytes = tensor_bytes(&held->dl_tensor);
  CHECK(bytes == 100 * 32 * 32 * 3);
  copy = (unsigned char*)malloc(bytes);
  REQUIRE(copy != NULL);
  memcpy(copy, held->dl_tensor.data, bytes);

  for (i = 0; i < 12; ++i) {
    DLManagedTensor* data = NULL;
    REQUIRE(sluice_loader_next(loader, &batch) == SLUICE_OK);
    REQUIRE(sluice_batch_data(batch, &data) == SLUICE_OK);
    CHECK(data->dl_tensor.data != held->dl_tensor.data);
    if (memcmp(data->dl_tensor.data, copy, bytes) != 0) ++differs;
    data->deleter(data);
    sluice_batch_release(batch);
  }
  CHECK(differs == 12); /* other batches hold other images: a refill would have shown */
  CHECK(memcmp(held->dl_tensor.data, copy, bytes) == 0);
  CHECK(((const int32_t*)held_labels->dl_tensor.data)[0] == 0);
  held->deleter(held);

  /* The slot is back: the epoch runs to its end. */
  while (sluice_loader_next(loader, &batch) == SLUICE_OK) {
    ++rest;
    sluice_batch_release(batch);
  }
  CHECK(rest == 100 - 13);

  /* A tensor outlives its loader: the pipeline goes when the last hold does. */
  REQUIRE(sluice_loader_start_epoch(loader, 1) == SLUICE_OK);
  REQUIRE(sluice_loader_next(loader, &batch) == SLUICE_OK);
  REQUIRE(sluice_batch_data(batch, &held) == SLUICE_OK);
  sluice_loader_destroy(loader);
  CHECK(memcmp(held->dl_tensor.data, copy, bytes) == 0); /* epoch 1 unshuffled: the same first batch */
  sluice_batch_release(batch);
  held->deleter(held);
  held_labels->deleter(held_labels);
  free(copy);
}

/* to_device(host) through the transfer ring: the tensors point into the ring, same values. */
static void test_ring_batches_equal_plain_batches(void) {
  sluice_loader_t* plain = make_loader("f16", "nchw", 64, "");
  sluice_loader_t* ring =
      make_loader("f16", "nchw", 64, ", {\"to_device\": {\"device\": \"host\", \"stage_through_ring\": true}}");
  sluice_batch_t* a = NULL;
  sluice_batch_t* b = NULL;
  DLManagedTensor* ta = NULL;
  DLManagedTensor* tb = NULL;
  DLManagedTensor* la = NULL;
  DLManagedTensor* lb = NULL;

  REQUIRE(sluice_loader_start_epoch(plain, 0) == SLUICE_OK);
  REQUIRE(sluice_loader_start_epoch(ring, 0) == SLUICE_OK);
  REQUIRE(sluice_loader_next(plain, &a) == SLUICE_OK);
  REQUIRE(sluice_loader_next(ring, &b) == SLUICE_OK);
  REQUIRE(sluice_batch_data(a, &ta) == SLUICE_OK);
  REQUIRE(sluice_batch_data(b, &tb) == SLUICE_OK);
  REQUIRE(sluice_batch_labels(a, &la) == SLUICE_OK);
  REQUIRE(sluice_batch_labels(b, &lb) == SLUICE_OK);
  CHECK(tb->dl_tensor.device.device_type == kDLCPU);
  CHECK(tensor_bytes(&ta->dl_tensor) == tensor_bytes(&tb->dl_tensor));
  CHECK(memcmp(ta->dl_tensor.data, tb->dl_tensor.data, tensor_bytes(&ta->dl_tensor)) == 0);
  CHECK(memcmp(la->dl_tensor.data, lb->dl_tensor.data, 64 * sizeof(int32_t)) == 0);
  ta->deleter(ta);
  tb->deleter(tb);
  la->deleter(la);
  lb->deleter(lb);
  sluice_batch_release(a);
  sluice_batch_release(b);
  sluice_loader_destroy(plain);
  sluice_loader_destroy(ring);
}

/* A spec file and a text spec with base_dir: relative paths resolve, options override. */
static void test_spec_file_and_options(const char* scratch) {
  char path[1200], spec[4096];
  FILE* f;
  sluice_loader_t* loader = NULL;
  sluice_loader_options_t options;
  sluice_loader_info_t info = SLUICE_LOADER_INFO_INIT;
  const char* stats = NULL;

  snprintf(path, sizeof path, "%s/c_api_test_spec.json", scratch);
  f = fopen(path, "wb");
  REQUIRE(f != NULL);
  cifar_spec(spec, sizeof spec, "bf16", "nhwc", 500, "");
  fputs(spec, f);
  fclose(f);
  REQUIRE(sluice_loader_create_from_file(path, NULL, &loader) == SLUICE_OK);
  REQUIRE(sluice_loader_info(loader, &info) == SLUICE_OK);
  CHECK(info.batches_per_epoch == 20);
  CHECK(info.dtype.code == kDLBfloat && info.dtype.bits == 16);
  CHECK(info.shape[3] == 3);
  sluice_loader_destroy(loader);

  sluice_loader_options_init(&options);
  options.base_dir = datasets_dir;
  options.threads = 1;
  REQUIRE(sluice_loader_create_from_json(
              "{\"source\": {\"folder\": \"cifar10/test\"}, \"stages\": [\"read\", \"decode_jpeg\","
              " {\"batch\": {\"size\": 1000}}]}",
              &options, &loader) == SLUICE_OK);
  REQUIRE(sluice_loader_stats_json(loader, &stats) == SLUICE_OK);
  CHECK(strstr(stats, "\"threads\":1") != NULL);
  sluice_loader_destroy(loader);
}

static void test_errors(void) {
  char spec[4096];
  sluice_loader_t* loader = (sluice_loader_t*)&loader; /* not NULL: creation must clear it */
  sluice_batch_t* batch = NULL;
  DLManagedTensor* tensor = NULL;
  sluice_loader_options_t bad_options = SLUICE_LOADER_OPTIONS_INIT;
  const char* truncated_spec_format =
      "{\"source\": {\"items\": [{\"path\": \"%s/corrupt/truncated.jpg\"}]},"
      " \"stages\": [\"read\", \"decode_jpeg\", {\"resize\": {\"size\": 8}}, {\"batch\": {\"size\": 1}}]}";

  CHECK(sluice_loader_create_from_json("{\"source\": {\"folder\": \"x\"}, \"stages\": [{\"batch\": {\"size\": -4}}]}",
                                       NULL, &loader) == SLUICE_INVALID_ARGUMENT);
  CHECK(loader == NULL);
  CHECK(strcmp(sluice_last_error(), "stages[0].batch.size: expected a positive integer, got -4") == 0);
  CHECK(sluice_loader_create_from_json("{\"source\": {\"folder\": \"x\"}, \"stages\": [\"decode_png\"]}", NULL,
                                       &loader) == SLUICE_INVALID_ARGUMENT);
  CHECK(strstr(sluice_last_error(), "stages[0]: unknown stage \"decode_png\"") != NULL);
  CHECK(sluice_loader_create_from_json("{\"stages\": []}", NULL, &loader) == SLUICE_INVALID_ARGUMENT);
  CHECK(strstr(sluice_last_error(), "source: missing") != NULL);
  CHECK(sluice_loader_create_from_json(
            "{\"source\": {\"folder\": \"x\"}, \"stages\": [{\"read\": {\"max_file_size\": true}}]}", NULL,
            &loader) == SLUICE_INVALID_ARGUMENT);
  CHECK(strstr(sluice_last_error(), "stages[0].read.max_file_size: expected a size") != NULL);
  CHECK(sluice_loader_create_from_json("not json", NULL, &loader) == SLUICE_INVALID_ARGUMENT);

  /* build()'s own validation comes through too. */
  snprintf(spec, sizeof spec,
           "{\"source\": {\"folder\": \"%s\"}, \"stages\": [\"decode_jpeg\", \"read\", {\"batch\": {\"size\": 4}}]}",
           cifar_dir);
  CHECK(sluice_loader_create_from_json(spec, NULL, &loader) == SLUICE_INVALID_ARGUMENT);
  CHECK(strstr(sluice_last_error(), "decode()") != NULL);

  CHECK(sluice_loader_create_from_json(
            "{\"source\": {\"folder\": \"/nonexistent/sluice-c-test\"}, \"stages\": [\"read\", \"decode_jpeg\","
            " {\"batch\": {\"size\": 4}}]}",
            NULL, &loader) == SLUICE_NOT_FOUND);
  CHECK(loader == NULL);
  CHECK(strstr(sluice_last_error(), "/nonexistent/sluice-c-test") != NULL);
  CHECK(sluice_loader_create_from_file("/nonexistent/spec.json", NULL, &loader) == SLUICE_NOT_FOUND);

  bad_options.struct_size = 0;
  CHECK(sluice_loader_create_from_json("{}", &bad_options, &loader) == SLUICE_INVALID_ARGUMENT);
  CHECK(strstr(sluice_last_error(), "struct_size") != NULL);
  CHECK(sluice_loader_create_from_json(NULL, NULL, &loader) == SLUICE_INVALID_ARGUMENT);
  CHECK(sluice_loader_next(NULL, &batch) == SLUICE_INVALID_ARGUMENT);
  CHECK(sluice_batch_data(NULL, &tensor) == SLUICE_INVALID_ARGUMENT);
  CHECK(tensor == NULL);
  sluice_batch_release(NULL);
  CHECK(sluice_batch_use_on_stream(NULL, NULL) == SLUICE_INVALID_ARGUMENT);
  sluice_loader_destroy(NULL);

  loader = make_loader("u8", "nhwc", 5000, "");
  CHECK(sluice_loader_next(loader, &batch) == SLUICE_INVALID_ARGUMENT); /* no epoch started */
  CHECK(strstr(sluice_last_error(), "start_epoch") != NULL);
  CHECK(sluice_loader_start_epoch(loader, -1) == SLUICE_INVALID_ARGUMENT);
  sluice_loader_destroy(loader);

  /* A corrupt file under on_error "fail": the error, then the epoch is over. */
  snprintf(spec, sizeof spec, truncated_spec_format, datasets_dir);
  REQUIRE(sluice_loader_create_from_json(spec, NULL, &loader) == SLUICE_OK);
  REQUIRE(sluice_loader_start_epoch(loader, 0) == SLUICE_OK);
  CHECK(sluice_loader_next(loader, &batch) == SLUICE_CORRUPT_DATA);
  CHECK(batch == NULL);
  CHECK(strstr(sluice_last_error(), "truncated.jpg") != NULL);
  CHECK(sluice_loader_next(loader, &batch) == SLUICE_END);
  sluice_loader_destroy(loader);

  CHECK(strcmp(sluice_status_string(SLUICE_NOT_FOUND), "not found") == 0);
}

/* A state saved by rank 1 of 4 (global batch 4000) after one step resumes at rank 0 of 2 (batch
 * 2000): the batch indices continue at 1 and the rank gets half of the 6000 samples left; a world
 * of 3 does not split 4000 and is refused, naming the sizes that do. */
static sluice_loader_t* sharded_loader(int rank, int world, int batch) {
  char spec[2048];
  sluice_loader_t* loader = NULL;
  snprintf(spec, sizeof spec,
           "{\"source\": {\"folder\": \"%s\"}, \"shard\": {\"rank\": %d, \"world\": %d},"
           " \"stages\": [\"read\", \"decode_jpeg\", {\"batch\": {\"size\": %d}}], \"build\": {\"threads\": 2}}",
           cifar_dir, rank, world, batch);
  REQUIRE(sluice_loader_create_from_json(spec, NULL, &loader) == SLUICE_OK);
  return loader;
}

static void test_state_at_another_world_size(void) {
  sluice_loader_t* four = sharded_loader(1, 4, 1000);
  sluice_loader_t* two = sharded_loader(0, 2, 2000);
  sluice_loader_t* three = sharded_loader(0, 3, 1000);
  sluice_batch_t* batch = NULL;
  const uint8_t* bytes = NULL;
  size_t size = 0;
  int64_t epoch = -1;
  int64_t samples = 0, next_index = 1;
  uint8_t* saved;
  REQUIRE(sluice_loader_start_epoch(four, 0) == SLUICE_OK);
  REQUIRE(sluice_loader_next(four, &batch) == SLUICE_OK);
  sluice_batch_release(batch);
  REQUIRE(sluice_loader_state(four, &bytes, &size) == SLUICE_OK);
  saved = (uint8_t*)malloc(size);
  REQUIRE(saved != NULL);
  memcpy(saved, bytes, size);
  CHECK(sluice_loader_restore(three, saved, size, &epoch) == SLUICE_INVALID_ARGUMENT);
  CHECK(strstr(sluice_last_error(), "1, 2, 4, 5") != NULL);
  CHECK(sluice_loader_restore(two, saved, size, &epoch) == SLUICE_OK);
  CHECK(epoch == 0);
  REQUIRE(sluice_loader_start_epoch(two, epoch) == SLUICE_OK);
  while (sluice_loader_next(two, &batch) == SLUICE_OK) {
    sluice_batch_info_t binfo = SLUICE_BATCH_INFO_INIT;
    REQUIRE(sluice_batch_info(batch, &binfo) == SLUICE_OK);
    CHECK(binfo.index == next_index++);
    CHECK(binfo.padding == 0);
    samples += binfo.size;
    sluice_batch_release(batch);
  }
  CHECK(samples == 3000);
  CHECK(next_index == 3);
  free(saved);
  sluice_loader_destroy(four);
  sluice_loader_destroy(two);
  sluice_loader_destroy(three);
}

int main(int argc, char** argv) {
  const char* env = getenv("SLUICE_DATASETS");
  const char* scratch = argc > 1 ? argv[1] : ".";
  char probe[1200];

  snprintf(datasets_dir, sizeof datasets_dir, "%s", env != NULL && *env != '\0' ? env : SLUICE_DATASETS_DIR);
  snprintf(cifar_dir, sizeof cifar_dir, "%s/cifar10/test", datasets_dir);
  snprintf(probe, sizeof probe, "%s/airplane/0000.jpg", cifar_dir);
  if (datasets_dir[0] == '\0' || !file_exists(probe)) {
    printf("SKIP: %s not found (set SLUICE_DATASETS)\n", probe);
    return 77;
  }
  printf("sluice %s\n", sluice_version());
  CHECK(strlen(sluice_version()) > 0);

  test_epoch_f32_nchw();
  test_state_at_another_world_size();
  check_first_batch("u8", "nhwc", kDLUInt, 8, 1);
  check_first_batch("f16", "nchw", kDLFloat, 16, 0);
  check_first_batch("bf16", "nhwc", kDLBfloat, 16, 1);
  check_first_batch("f32", "nhwc", kDLFloat, 32, 1);
  test_held_tensor_keeps_its_slot();
  test_ring_batches_equal_plain_batches();
  test_spec_file_and_options(scratch);
  test_errors();

  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
