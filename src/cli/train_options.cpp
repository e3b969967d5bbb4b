// The options train and plan share, and their translation to the training core's configuration.
#include "cli/train_options.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/number_flags.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/compressed_weights.hpp"
#include "sluice/train/profiler.hpp"
#include "sluice/train/weights_file.hpp"
#include "sluice/core/units.hpp"
#include "sluice/train/models.hpp"

namespace sluice::cli {

void add_model_options(CLI::App* cmd, TrainOptions& o) {
  std::vector<std::string> models;
  for (const train::ModelInfo& m : train::model_catalog()) models.push_back(m.name);
  cmd->add_option("--model", o.model,
                  "One of the model catalog's: " + train::model_names() +
                      " (default: the one made for --dataset, else cifar10-separable)")
      ->check(CLI::IsMember(models));
  cmd->add_option("--batch", o.batch_text,
                  "Training batch size (2..65536), or auto: the largest that fits --memory's limit")
      ->capture_default_str();
  cmd->add_option("--accumulate", o.accumulate_text,
                  "Gradient accumulation: K micro-batches of batch/K per optimizer step (K must divide --batch), "
                  "or auto: the smallest K that fits --memory's limit, keeping --batch as the effective batch")
      ->capture_default_str();
  cmd->add_option("--checkpoint", o.checkpoint,
                  "Gradient checkpointing: none, sqrt (segments of ceil(sqrt(layers))) or every:K "
                  "(segments of K layers)")
      ->capture_default_str();
  cmd->add_option("--optimizer", o.optimizer, "sgd (Nesterov momentum 0.9) or adam (AdamW)")
      ->check(CLI::IsMember({"sgd", "adam"}))->capture_default_str();
  cmd->add_option("--precision", o.precision,
                  "f32, or mixed_f16 / mixed_bf16: 16-bit forward and backward, f32 master weights (f16 with "
                  "dynamic loss scaling)")
      ->check(CLI::IsMember({"f32", "mixed_f16", "mixed_bf16"}))->capture_default_str();
  cmd->add_option("--offload", o.offload,
                  "optimizer: keep the optimizer's state (AdamW moments, SGD momentum) in host memory, pinned "
                  "for a CUDA device, streamed through a device staging buffer each step")
      ->check(CLI::IsMember({"none", "optimizer"}))->capture_default_str();
  cmd->add_option("--lr", o.lr, "Peak learning rate (default 0.05 for sgd, 0.001 for adam)")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o.threads, "Training threads (default: all cores)")->check(thread_count(false));
  cmd->add_option("--device", o.device, "cpu or cuda:N")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the initialisation, shuffling, augmentation and dropout")
      ->check(unsigned_up_to(UINT64_MAX))->capture_default_str();
  cmd->add_option("--memory", o.memory,
                  "The training allocator: grow (regions as needed), grow:LIMIT (as needed, up to LIMIT) or "
                  "prealloc:SIZE (one region of SIZE at start, never more); sizes like 512MiB, 2GiB")
      ->capture_default_str();
  cmd->add_option("--memory-limit", o.memory_limit,
                  "One limit for the whole job: the training allocator, the input pipelines (their caches "
                  "included) and offloaded optimizer state, planned together before step 1 (on a CUDA device: "
                  "the device's memory); e.g. 1GiB");
  cmd->add_option("--host-memory-limit", o.host_memory_limit,
                  "With a CUDA device: the host side's limit (pipelines, page-locked rings, offloaded optimizer "
                  "state), apart from --memory-limit's device memory");
  cmd->add_flag("--no-eval", o.no_eval, "Skip the test set (for speed measurements)");
}

DataOptions add_data_options(CLI::App* cmd, TrainOptions& o) {
  DataOptions d;
  d.dataset = cmd->add_option("--dataset", o.dataset, "A prepared data set under --data-root")
                  ->check(CLI::IsMember({"fashion-mnist"}));
  d.data = cmd->add_option("--data", o.data, "A folder with train/ and test/ image folders")->check(CLI::ExistingDirectory);
  d.dataset->excludes(d.data);
  d.shards = cmd->add_option("--shards", o.shards, "Tar shards of the training split (a pattern: brace ranges, globs)");
  d.shards->excludes(d.dataset)->excludes(d.data);
  cmd->add_option("--test-shards", o.test_shards, "Tar shards of the test split (with --shards)")->needs(d.shards);
  cmd->add_option("--data-root", o.data_root, "Where `sluice prepare` wrote --dataset")->capture_default_str();
  cmd->add_option("--loader-threads", o.loader_threads, "Pipeline worker threads")->check(thread_count(false))
      ->capture_default_str();
  return d;
}

void apply_model_defaults(TrainOptions& o) {
  const train::ModelInfo& model = o.model.empty() ? train::default_model(o.dataset) : train::model_info(o.model);
  o.model = model.name;
  if (o.epochs == 0) o.epochs = model.default_epochs;
}

DeviceId parse_device(const std::string& text) {
  if (text == "cpu" || text == "host") return host();
  if (text.rfind("cuda:", 0) == 0) {
    try {
      std::size_t used = 0;
      const int index = std::stoi(text.substr(5), &used);
      if (used == text.size() - 5 && index >= 0) return cuda(index);
    } catch (const std::exception&) {
    }
  }
  throw Error(ErrorCode::kInvalidArgument, "--device must be cpu or cuda:N, got \"" + text + "\"");
}

AllocatorOptions parse_memory(const std::string& text) {
  AllocatorOptions a{.name = "training"};
  const std::size_t colon = text.find(':');
  const std::string mode = text.substr(0, colon);
  auto size = [&](const char* what) {
    const std::string arg = colon == std::string::npos ? std::string() : text.substr(colon + 1);
    const auto bytes = parse_size(arg);
    if (!bytes || *bytes < Allocator::kGranularity) {
      throw Error(ErrorCode::kInvalidArgument, "--memory " + text + ": cannot read \"" + arg + "\" as the " + what +
                                                   " (a size of at least 256 B, e.g. 512MiB or 2GiB)");
    }
    return *bytes;
  };
  if (mode == "grow") {
    a.mode = AllocatorMode::kGrow;
    if (colon != std::string::npos) a.limit = size("limit");
    return a;
  }
  if (mode == "prealloc") {
    if (colon == std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument, "--memory prealloc needs a size: prealloc:SIZE, e.g. prealloc:2GiB");
    }
    a.mode = AllocatorMode::kPreallocate;
    a.limit = size("size");
    return a;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "--memory must be grow, grow:LIMIT or prealloc:SIZE (e.g. grow:1GiB, prealloc:2GiB), got \"" + text + "\"");
}

std::string describe_memory(const AllocatorOptions& a) {
  if (a.mode == AllocatorMode::kPreallocate) return "preallocated " + format_bytes(a.limit);
  return a.limit == 0 ? std::string("grow (no limit)") : "grow up to " + format_bytes(a.limit);
}

int parse_batch(const std::string& text) {
  if (text == "auto") return 0;
  try {
    std::size_t used = 0;
    const long v = std::stol(text, &used);
    if (used == text.size() && v >= 2 && v <= 65536) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw Error(ErrorCode::kInvalidArgument, "--batch must be a number in [2, 65536] or auto, got \"" + text + "\"");
}

int parse_accumulate(const std::string& text) {
  if (text == "auto") return 0;
  try {
    std::size_t used = 0;
    const long v = std::stol(text, &used);
    if (used == text.size() && v >= 1 && v <= 65536) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw Error(ErrorCode::kInvalidArgument,
              "--accumulate must be >= 1 micro-batches (or auto: the fewest that fit --memory), got " + text);
}

train::TrainConfig train_config(const TrainOptions& o, std::int64_t batch, std::int64_t total_steps) {
  return train::TrainConfig{.model = o.model, .batch = batch, .optimizer = o.optimizer, .lr = o.lr, .seed = o.seed,
                            .total_steps = total_steps, .accumulate = o.accumulate, .checkpoint = o.checkpoint,
                            .offload = o.offload == "optimizer", .precision = o.precision};
}

void check_outputs(const TrainOptions& o) {
  if (!o.save.empty()) train::check_weights_output(o.save);
  if (!o.save_pruned.empty()) train::check_pruned_weights_output(o.save_pruned);
  if (!o.profile.empty()) train::Profiler::check_trace_output(o.profile);
}

}  // namespace sluice::cli
