// The public Loader (sluice/runtime/loader.hpp) and Pipeline::build: thin forwards to LoaderImpl.
#include "sluice/runtime/loader.hpp"

#include <string>

#include "runtime/loader_build.hpp"
#include "runtime/loader_impl.hpp"
#include "runtime/loader_memory_plan.hpp"
#include "sluice/core/error.hpp"
#include "stages/program/resolved_pipeline.hpp"

namespace sluice {

namespace runtime {
Loader build_loader(const Pipeline& pipeline, const BuildOptions& options, stages::FileOps* file_ops) {
  return Loader(std::make_unique<LoaderImpl>(stages::resolve_pipeline(pipeline.spec(), options, file_ops)));
}
}  // namespace runtime

Loader Pipeline::build(const BuildOptions& options) const { return runtime::build_loader(*this, options, nullptr); }

PipelineMemoryPlan Pipeline::plan_memory(const BuildOptions& options) const {
  return runtime::describe_memory(stages::resolve_pipeline(spec(), options, nullptr));
}

std::uint64_t PipelineMemoryPlan::minimum_bytes() const {
  std::uint64_t sum = 0;
  for (const std::uint64_t b : minimum) sum += b;
  return sum;
}

Loader::Loader(std::unique_ptr<LoaderImpl> impl) : impl_(std::move(impl)) {}
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;
Loader::~Loader() = default;

Loader::EpochRange Loader::epoch(std::int64_t e) { return EpochRange(impl_.get(), e); }
std::int64_t Loader::samples_per_epoch() const { return impl_->samples_per_epoch(); }
std::int64_t Loader::batches_per_epoch() const { return impl_->batches_per_epoch(); }
std::vector<OutputDescription> Loader::outputs() const { return impl_->outputs(); }
Shape Loader::batch_shape() const { return impl_->outputs()[0].shape; }
DType Loader::dtype() const { return impl_->outputs()[0].dtype; }
Stats Loader::stats() const { return impl_->stats(); }
std::vector<std::uint8_t> Loader::state() const { return impl_->state(); }
void Loader::restore(std::span<const std::uint8_t> state) { impl_->restore(state); }
std::int64_t Loader::resume_epoch() const { return impl_->resume_epoch(); }
std::int64_t Loader::dataset_size() const { return impl_->dataset().items.size(); }

namespace {
void check_item(std::int64_t item, std::int64_t size) {
  if (item < 0 || item >= size) {
    throw Error(ErrorCode::kInvalidArgument,
                "item " + std::to_string(item) + " is outside the data set of " + std::to_string(size) + " items");
  }
}
}  // namespace

std::string Loader::item_path(std::int64_t item) const {
  check_item(item, dataset_size());
  return impl_->dataset().items.path(item);
}
std::int32_t Loader::item_label(std::int64_t item) const {
  check_item(item, dataset_size());
  return impl_->dataset().items.label(item);
}
const std::vector<std::string>& Loader::class_names() const { return impl_->dataset().class_names; }
void Loader::cancel() { impl_->cancel(); }
void Loader::set_wait_check(std::function<bool()> check, std::chrono::milliseconds interval) {
  impl_->set_wait_check(std::move(check), interval);
}

Loader::Iterator::Iterator(LoaderImpl* impl, std::int64_t epoch) : impl_(impl), epoch_(epoch) {
  impl_->start_epoch(epoch_);
  done_ = false;
  fetch();
}

Loader::Iterator& Loader::Iterator::operator++() {
  current_.release();
  fetch();
  return *this;
}

void Loader::Iterator::fetch() {
  try {
    done_ = !impl_->next(current_);
  } catch (...) {
    done_ = true;
    throw;
  }
}

}  // namespace sluice
