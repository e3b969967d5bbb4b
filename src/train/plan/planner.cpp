// plan_peak: a dry run of the real training step on the meta backend over address space.
#include "sluice/train/planner.hpp"

#include <sys/mman.h>

#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/train/context.hpp"
#include "sluice/train/models.hpp"
#include "sluice/train/out_of_memory.hpp"
#include "sluice/train/trainer.hpp"
#include "train/tensor/backend.hpp"

namespace sluice::train {
namespace {

// A host input batch nobody reads: address space only.
class FakeBatch {
 public:
  FakeBatch(const ModelInfo& info, std::int64_t batch) : labels_(static_cast<std::size_t>(batch), 0) {
    view_.dtype = DType::kF32;
    view_.shape = Shape{batch, info.channels, info.height, info.width};
    bytes_ = view_.bytes();
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw Error(ErrorCode::kInvalidArgument, "planner: no address space for a batch of " + std::to_string(batch));
    view_.data = p;
  }
  ~FakeBatch() { ::munmap(view_.data, bytes_); }
  FakeBatch(const FakeBatch&) = delete;
  FakeBatch& operator=(const FakeBatch&) = delete;
  const TensorView& view() const { return view_; }
  std::span<const std::int32_t> labels() const { return labels_; }

 private:
  TensorView view_;
  std::size_t bytes_ = 0;
  std::vector<std::int32_t> labels_;
};

// The out-of-memory report's request and reason ("OUT OF MEMORY: allocate(...) ... why: ..."), on
// one line; the report's first line (which allocator) when it has no such line.
std::string failure_text(const std::string& report) {
  std::string out;
  std::size_t pos = report.find("OUT OF MEMORY");
  if (pos == std::string::npos) return report.substr(0, report.find('\n'));
  bool first = true;
  while (pos < report.size()) {
    const std::size_t end = std::min(report.find('\n', pos), report.size());
    std::string line = report.substr(pos, end - pos);
    if (!first && (line.empty() || line[0] != ' ')) break;
    const std::size_t text = line.find_first_not_of(' ');
    if (text != std::string::npos) out += (out.empty() ? "" : " ") + line.substr(text);
    first = false;
    pos = end + 1;
  }
  return out;
}

}  // namespace

TrainingMemoryPlan plan_peak(const PlanConfig& config) {
  TrainingMemoryPlan plan;
  AllocatorOptions options = config.allocator;
  options.name = "plan";
  Allocator allocator(make_address_space_backing(), options);  // a preallocated region is address space too
  const ModelInfo& info = model_info(config.train.model);
  FakeBatch batch(info, config.train.batch);
  std::optional<FakeBatch> eval;
  if (config.eval_batch > 0) eval.emplace(info, config.eval_batch);
  std::uint64_t step_peak = 0;
  try {
    Context ctx(allocator, ContextOptions{.threads = config.threads,
                                          .meta = true,
                                          .meta_device = config.device,
                                          .meta_compute_major = config.compute_major});
    plan.backend = ctx.backend().describe();
    TrainSetup setup = make_training(ctx, config.train);
    plan.parameters = setup.model->parameter_count();
    Trainer trainer(ctx, *setup.model, *setup.optimizer, setup.trainer);
    for (int e = 0; e < std::min(config.epochs, 2); ++e) {
      allocator.reset_peak();
      for (int s = 0; s < config.steps; ++s) trainer.step(batch.view(), batch.labels(), host());
      step_peak = std::max(step_peak, allocator.stats().peak_in_use_bytes);
      if (eval) trainer.evaluate(eval->view(), eval->labels(), host());
      const AllocatorStats st = allocator.stats();
      plan.peak_in_use_bytes = std::max(plan.peak_in_use_bytes, st.peak_in_use_bytes);
      for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
        plan.peak_by_category[i] = std::max(plan.peak_by_category[i], st.by_category[i].peak_in_use_bytes);
      }
    }
    if (const Allocator* h = setup.optimizer->host_state_allocator()) plan.offload_reserved_bytes = h->stats().reserved_bytes;
  } catch (const OutOfMemory& e) {
    plan.fits = false;
    plan.failure = failure_text(e.what());
    const AllocatorStats st = allocator.stats();
    plan.peak_in_use_bytes = std::max(plan.peak_in_use_bytes, st.peak_in_use_bytes);
    for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
      plan.peak_by_category[i] = std::max(plan.peak_by_category[i], st.by_category[i].peak_in_use_bytes);
    }
  }
  plan.step_peak_in_use_bytes = step_peak;
  plan.reserved_bytes = allocator.stats().reserved_bytes;
  return plan;
}

}  // namespace sluice::train
