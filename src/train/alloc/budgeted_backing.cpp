// The budgeted backing (backing.hpp): a reservation that covers the regions, never below its floor.
#include <algorithm>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/train/backing.hpp"

namespace sluice {
namespace {

class BudgetedBacking final : public Backing {
 public:
  BudgetedBacking(std::unique_ptr<Backing> inner, std::shared_ptr<MemoryBudget> budget, BudgetedBackingOptions options)
      : inner_(std::move(inner)), budget_(std::move(budget)), options_(options) {
    std::optional<Reservation> floor = budget_->try_reserve(options_.floor, options_.use);
    if (!floor) {
      throw Error(ErrorCode::kOutOfBudget, "the " + std::string(to_string(options_.use)) + " share of " +
                                               format_bytes(options_.floor) + " does not fit the memory budget: " +
                                               format_bytes(budget_->available()) + " of " +
                                               format_bytes(budget_->limit()) + " is left");
    }
    held_ = std::move(*floor);
  }

  DeviceId device() const override { return inner_->device(); }

  std::string describe() const override {
    std::string text = inner_->describe() + ", inside a memory budget";
    if (budget_->limit() != 0) text += " of " + format_bytes(budget_->limit());
    text += " (" + format_bytes(regions_) + " in regions, " + format_bytes(held_.bytes()) + " held of which " +
            format_bytes(options_.floor) + " planned; " +
            (budget_->limit() != 0 ? format_bytes(budget_->available()) + " left after asking the caches)"
                                   : std::string("no limit)"));
    return text;
  }

  void* allocate(std::size_t bytes) override {
    const std::uint64_t needed = regions_ + bytes;
    if (needed > held_.bytes() && !budget_->try_grow(held_, needed - held_.bytes(), Reclaim::kYes)) return nullptr;
    void* p = inner_->allocate(bytes);
    if (p == nullptr) {
      shrink_to_use();
      return nullptr;
    }
    regions_ = needed;
    return p;
  }

  void deallocate(void* ptr, std::size_t bytes) noexcept override {
    inner_->deallocate(ptr, bytes);
    regions_ -= std::min<std::uint64_t>(regions_, bytes);
    shrink_to_use();
  }

 private:
  // What is held beyond both the regions and the floor goes back to the budget.
  void shrink_to_use() {
    const std::uint64_t keep = std::max(regions_, options_.floor);
    if (held_.bytes() > keep) held_.shrink(held_.bytes() - keep);
  }

  std::unique_ptr<Backing> inner_;
  std::shared_ptr<MemoryBudget> budget_;
  BudgetedBackingOptions options_;
  Reservation held_;  // max(regions, floor)
  std::uint64_t regions_ = 0;
};

}  // namespace

std::unique_ptr<Backing> make_budgeted_backing(std::unique_ptr<Backing> inner, std::shared_ptr<MemoryBudget> budget,
                                               BudgetedBackingOptions options) {
  if (!inner || !budget) throw Error(ErrorCode::kInvalidArgument, "make_budgeted_backing: no backing or no budget");
  return std::make_unique<BudgetedBacking>(std::move(inner), std::move(budget), options);
}

}  // namespace sluice
