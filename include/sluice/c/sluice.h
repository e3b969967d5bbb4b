/* sluice.h: the C API of sluice, for frameworks that take sluice as their input layer without
 * writing C++ (valid C99; C++ can include it too). A loader is built from a JSON pipeline spec
 * (docs/json-spec.md), iterated one epoch at a time, and hands out batches whose data and labels
 * leave as DLPack tensors that share the batch's memory (no copy).
 *
 *   sluice_loader_t* loader;
 *   if (sluice_loader_create_from_file("train.json", NULL, &loader) != SLUICE_OK)
 *     fprintf(stderr, "%s\n", sluice_last_error());
 *   sluice_loader_start_epoch(loader, 0);
 *   sluice_batch_t* batch;
 *   while (sluice_loader_next(loader, &batch) == SLUICE_OK) {
 *     DLManagedTensor* data;
 *     sluice_batch_data(batch, &data);    // hand `data` to a consumer, which calls its deleter
 *     sluice_batch_release(batch);        // the slot stays held while `data` is alive
 *     ...
 *   }
 *   sluice_loader_destroy(loader);
 *
 * Errors: every function that can fail returns a sluice_status_t; on an error the message is
 * kept per thread (sluice_last_error). No C++ exception crosses this interface.
 *
 * Memory: a batch holds one slot of the loader's batch ring. The slot goes back to the ring when
 * the batch handle AND every DLManagedTensor taken from it have been released, so a tensor a
 * consumer still holds is never overwritten; holding many batches holds back production rather
 * than growing memory: the ring has prefetch depth + 2 slots, and a consumer that holds that many
 * batches (or tensors of that many distinct batches) at once, with no other thread to release
 * one, waits in sluice_loader_next forever; copy what must outlive the next few batches.
 * Destroying the loader while batches or tensors are alive is allowed: the loader stops and
 * frees its memory when the last of them is released.
 *
 * Threads: a loader is used from one thread at a time; batches and tensors may be released from
 * any thread.
 *
 * ABI: option and info structs start with struct_size, which the caller sets to the size it was
 * compiled with (the _init functions do), so fields added later at their end do not break callers
 * built against this version. */
#ifndef SLUICE_C_SLUICE_H_
#define SLUICE_C_SLUICE_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Results. SLUICE_OK and SLUICE_END are not errors; the errors are negative and mirror
 * sluice::ErrorCode, plus SLUICE_OUT_OF_MEMORY for an allocation that failed. */
typedef enum sluice_status {
  SLUICE_OK = 0,
  SLUICE_END = 1,                  /* sluice_loader_next: the epoch has no more batches */
  SLUICE_INVALID_ARGUMENT = -1,    /* bad spec or configuration: the message names what to change */
  SLUICE_NOT_FOUND = -2,           /* missing file or folder */
  SLUICE_PERMISSION_DENIED = -3,
  SLUICE_IO = -4,
  SLUICE_CORRUPT_DATA = -5,        /* truncated or malformed input */
  SLUICE_UNSUPPORTED_FORMAT = -6,  /* not a JPEG, or a JPEG feature sluice does not decode */
  SLUICE_TOO_LARGE = -7,
  SLUICE_OUT_OF_BUDGET = -8,       /* the pipeline cannot run inside its memory budget */
  SLUICE_CANCELLED = -9,
  SLUICE_INTERNAL = -10,           /* a bug in sluice */
  SLUICE_OUT_OF_MEMORY = -11
} sluice_status_t;

typedef struct sluice_loader sluice_loader_t;
typedef struct sluice_batch sluice_batch_t;

/* "0.1.0": the library's version. */
const char* sluice_version(void);
/* "invalid argument", "end of epoch", ...: a status's name, for messages. */
const char* sluice_status_string(sluice_status_t status);
/* The message of the last error on this thread ("" when none). It stays valid until the next
 * call on this thread that fails. */
const char* sluice_last_error(void);

/* threads: SLUICE_THREADS_FROM_SPEC keeps the spec's build.threads. */
#define SLUICE_THREADS_FROM_SPEC 0
#define SLUICE_THREADS_AUTO (-1)

typedef struct sluice_loader_options {
  size_t struct_size;      /* sizeof(sluice_loader_options_t) */
  /* Relative paths in a spec given as text resolve against this folder; NULL: the working
   * directory. (A spec file's relative paths always resolve against the file's folder.) */
  const char* base_dir;
  /* Overrides build.threads when not SLUICE_THREADS_FROM_SPEC: a positive count or
   * SLUICE_THREADS_AUTO. */
  int threads;
  /* Overrides build.memory_budget when not 0 (bytes). */
  uint64_t memory_budget;
  /* With a to_device stage: the consumer's cudaStream_t, which waits for each batch's copy;
   * NULL: the legacy default stream. */
  void* cuda_stream;
  /* Called every 50 ms or so, on the creating thread, while the create call waits on the
   * network (remote shards and lists, docs/remote.md) with stop_user: non-zero ends the call
   * with SLUICE_CANCELLED. NULL: the fetch runs to its end. */
  int (*stop)(void* stop_user);
  void* stop_user;
} sluice_loader_options_t;

#define SLUICE_LOADER_OPTIONS_INIT \
  { sizeof(sluice_loader_options_t), NULL, SLUICE_THREADS_FROM_SPEC, 0, NULL, NULL, NULL }
void sluice_loader_options_init(sluice_loader_options_t* options);

/* Builds a loader from a JSON spec given as text or as a file. options may be NULL (defaults).
 * On success *loader is the new loader; on failure it is NULL and the status says why
 * (SLUICE_INVALID_ARGUMENT for a bad spec, naming the field: "stages[2].batch.size: expected a
 * positive integer, got -4"; SLUICE_NOT_FOUND for a missing data set or spec file). */
sluice_status_t sluice_loader_create_from_json(const char* json_text, const sluice_loader_options_t* options,
                                               sluice_loader_t** loader);
sluice_status_t sluice_loader_create_from_file(const char* spec_path, const sluice_loader_options_t* options,
                                               sluice_loader_t** loader);
/* Drops the caller's handle (NULL is fine). Batches and tensors still alive keep the pipeline
 * until they are released. */
void sluice_loader_destroy(sluice_loader_t* loader);

typedef struct sluice_loader_info {
  size_t struct_size;          /* sizeof(sluice_loader_info_t) */
  int64_t samples_per_epoch;   /* of this shard */
  int64_t batches_per_epoch;
  /* The batch's data as the consumer receives it (normalised on the device when the spec asks):
   * the C++ Loader's outputs()[0]. */
  int32_t ndim;                /* of a batch's data: 4 */
  int64_t shape[6];            /* of a full batch: (N, C, H, W) or (N, H, W, C) */
  DLDataType dtype;            /* of a batch's data */
  DLDevice device;             /* where batches are: kDLCPU or kDLCUDA */
} sluice_loader_info_t;

#define SLUICE_LOADER_INFO_INIT \
  { sizeof(sluice_loader_info_t), 0, 0, 0, {0, 0, 0, 0, 0, 0}, {0, 0, 0}, {kDLCPU, 0} }
sluice_status_t sluice_loader_info(const sluice_loader_t* loader, sluice_loader_info_t* info);

/* Starts epoch `epoch` (>= 0): its order and augmentations follow from the seed and the epoch.
 * Abandons what is left of the current epoch; batches already handed out stay valid. Production
 * begins with the first sluice_loader_next. */
sluice_status_t sluice_loader_start_epoch(sluice_loader_t* loader, int64_t epoch);
/* Waits for the epoch's next batch. SLUICE_OK: *batch is a new batch handle, release it with
 * sluice_batch_release. SLUICE_END: the epoch is complete, *batch is NULL (and stays so on
 * later calls until the next sluice_loader_start_epoch). An error (a bad file under
 * on_error "fail") ends the epoch: later calls return SLUICE_END. */
sluice_status_t sluice_loader_next(sluice_loader_t* loader, sluice_batch_t** batch);

/* The loader's statistics as a JSON object (per-stage busy time, samples, skipped files and
 * skip_events, the replacements made, files recovered in spite of libjpeg warnings, memory per use,
 * cache, tuning), in the schema docs/stats.md describes, which Python and `sluice bench --json`
 * share; a path that is not UTF-8 keeps its bytes (docs/stats.md says how). *json is owned by the
 * loader and valid until the next call of this function on it or its destruction. */
sluice_status_t sluice_loader_stats_json(sluice_loader_t* loader, const char** json);

/* Resumable iteration (docs/distributed.md). sluice_loader_state: where the whole job is (the
 * epoch, the global steps delivered in it, the global batch, a fingerprint of the pipeline; never
 * the rank or world size: every rank at the same step writes the same bytes). *bytes is owned by
 * the loader and valid until the next call of this function on it or its destruction.
 * sluice_loader_restore: continues from such a state, written by any rank at any world size with
 * the same global batch (batch size x world): the next sluice_loader_start_epoch(*epoch) delivers
 * every sample of the saved epoch not delivered yet, exactly once over all ranks. Abandons the
 * epoch in progress. epoch may be NULL. SLUICE_INVALID_ARGUMENT for a state of another pipeline,
 * another global batch (the message names the world sizes that would work) or damaged bytes. */
sluice_status_t sluice_loader_state(sluice_loader_t* loader, const uint8_t** bytes, size_t* size);
sluice_status_t sluice_loader_restore(sluice_loader_t* loader, const uint8_t* bytes, size_t size, int64_t* epoch);

typedef struct sluice_batch_info {
  size_t struct_size;     /* sizeof(sluice_batch_info_t) */
  int64_t size;           /* samples in the batch (the last one of an epoch may be short) */
  int64_t epoch;
  int64_t index;          /* the batch's position in its epoch */
  DLDevice device;
  /* With a CUDA device: the cudaEvent_t the batch's copy recorded (the loader's stream already
   * waits on it; other streams can wait too). NULL otherwise. */
  void* ready_event;
  /* The batch's last `padding` samples repeat earlier ones (a rank short of samples at the end of
   * an epoch pads its last batch so every rank yields as many batches); 0 otherwise. */
  int64_t padding;
} sluice_batch_info_t;

#define SLUICE_BATCH_INFO_INIT { sizeof(sluice_batch_info_t), 0, 0, 0, {kDLCPU, 0}, NULL, 0 }
sluice_status_t sluice_batch_info(const sluice_batch_t* batch, sluice_batch_info_t* info);

/* The batch's data (N, C, H, W) or (N, H, W, C) in u8, f16, bf16 or f32, and its labels (N) in
 * int32 (with a mixup or cutmix stage: the soft labels, (N, num_classes) in float32), as DLPack tensors with explicit strides, on the CPU or, after a to_device stage, on the
 * CUDA device. Each call returns a new DLManagedTensor sharing the batch's memory; its deleter
 * (called by whoever consumes it) releases that hold on the batch's slot. */
sluice_status_t sluice_batch_data(sluice_batch_t* batch, DLManagedTensor** tensor);
sluice_status_t sluice_batch_labels(sluice_batch_t* batch, DLManagedTensor** tensor);

/* Declares that the caller reads the batch's tensors on `cuda_stream` (a cudaStream_t; NULL: the
 * legacy default stream), a stream other than the loader's (sluice_loader_options_t.cuda_stream):
 * that stream waits, on the device, for the batch's copy, and once the batch is released its slot
 * is refilled only after the work queued on that stream by then has run. Call it before queueing
 * work on the stream, once per stream (at most 4 besides the loader's); the stream must outlive
 * the batch's release. Without a to_device stage to a CUDA device it does nothing. */
sluice_status_t sluice_batch_use_on_stream(sluice_batch_t* batch, void* cuda_stream);

/* Releases the handle (NULL is fine). The slot returns to the ring once no tensor from the
 * batch is alive either. */
void sluice_batch_release(sluice_batch_t* batch);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* SLUICE_C_SLUICE_H_ */
