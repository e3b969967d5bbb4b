// The job's plan: the training share from dry runs, the pipelines' minimums, the rest to prefetch
// and caches; its explanation; the budgets that hold it at run time.
#include "sluice/train/job_plan.hpp"

#include <algorithm>
#include <cstdio>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/train/backing.hpp"

namespace sluice::train {
namespace {

// The tightest region is exact to the allocator's granularity; the search brackets it from the
// peak in use with margins from 64 KiB, doubling.
constexpr std::uint64_t kRegionStep = Allocator::kGranularity;
constexpr std::uint64_t kFirstMargin = 64 * 1024;

std::uint64_t round_up(std::uint64_t v, std::uint64_t step) { return (v + step - 1) / step * step; }

AllocatorOptions one_region(std::uint64_t bytes) {
  return AllocatorOptions{.mode = AllocatorMode::kPreallocate, .limit = bytes, .name = "training"};
}

std::string flags_to_lower_training() {
  return "a smaller --batch, --accumulate K, --checkpoint sqrt or --precision mixed_bf16";
}

}  // namespace

std::uint64_t PipelineNeeds::minimum_bytes() const {
  std::uint64_t sum = 0;
  for (const std::uint64_t b : minimum) sum += b;
  return sum;
}

std::string PipelineNeeds::explain_minimum() const {
  std::string text;
  for (int u = 0; u < kPipelineUseCount; ++u) {
    if (minimum[static_cast<std::size_t>(u)] == 0) continue;
    text += (text.empty() ? "" : ", ") + std::string(to_string(static_cast<MemoryUse>(u))) + " " +
            format_bytes(minimum[static_cast<std::size_t>(u)]);
  }
  return text.empty() ? std::string("nothing") : text;
}

std::uint64_t JobPlan::host_bytes() const {
  std::uint64_t sum = offload_bytes;
  for (const PipelineShare& p : pipelines) sum += p.bytes();
  if (!separate_host()) sum += training_bytes;
  return sum;
}

std::uint64_t tightest_region(const PlanConfig& base, std::uint64_t ceiling, std::int64_t* dry_runs) {
  std::int64_t runs = 0;
  auto fits = [&](std::uint64_t bytes) {
    ++runs;
    PlanConfig pc = base;
    pc.allocator = one_region(bytes);
    return plan_peak(pc).fits;
  };
  PlanConfig unbounded = base;
  unbounded.allocator = AllocatorOptions{};
  ++runs;
  // No region smaller than the peak in use can hold it; most fit at once or a little above.
  const std::uint64_t peak = std::max<std::uint64_t>(plan_peak(unbounded).peak_in_use_bytes, 1);
  std::uint64_t result = 0;
  if (peak <= ceiling) {
    const std::uint64_t lo = std::min(round_up(peak, kRegionStep), ceiling);
    if (fits(lo)) {
      result = lo;
    } else {
      // Bracket by growing the margin, then bisect: the smallest region that fits. The ceiling
      // itself is a candidate, so a region that fits the ceiling is found whatever its rounding.
      std::uint64_t fail = lo;
      for (std::uint64_t margin = kFirstMargin; fail < ceiling; margin *= 2) {
        const std::uint64_t candidate = std::min(ceiling, lo + margin);
        if (fits(candidate)) {
          result = candidate;
          break;
        }
        fail = candidate;
      }
      while (result != 0 && result - fail > kRegionStep) {
        const std::uint64_t mid = fail + round_up((result - fail) / 2, kRegionStep);
        if (mid >= result) break;
        if (fits(mid)) result = mid;
        else fail = mid;
      }
    }
  }
  if (dry_runs != nullptr) *dry_runs += runs;
  return result;
}

namespace {

// Where the training's share comes from, and whether its dry run fits there.
void plan_training(const JobConfig& config, const PlanConfig& pc, std::uint64_t room, JobPlan& plan) {
  if (config.allocator) {
    plan.hand_split = true;
    plan.allocator = *config.allocator;
    plan.training_bytes = config.allocator->limit;
    PlanConfig hand = pc;
    hand.allocator = *config.allocator;
    plan.training = plan_peak(hand);
    ++plan.dry_runs;
    return;
  }
  // The region may be as large as the whole limit: a plan that does not fit still says how
  // large a region the step needs, for the message.
  std::uint64_t region = tightest_region(pc, room, &plan.dry_runs);
  if (region == 0) {
    PlanConfig unbounded = pc;
    unbounded.allocator = AllocatorOptions{};
    region = round_up(plan_peak(unbounded).reserved_bytes, kRegionStep);
    region = tightest_region(pc, region, &plan.dry_runs);  // the true need, past the limit
  }
  plan.training_bytes = region;
  plan.allocator = AllocatorOptions{.mode = AllocatorMode::kGrow, .limit = 0, .initial_region_bytes = region,
                                    .growth = RegionGrowth::kRequest, .name = "training"};
  PlanConfig at = pc;
  at.allocator = one_region(std::max<std::uint64_t>(region, Allocator::kGranularity));
  plan.training = plan_peak(at);
  ++plan.dry_runs;
}

std::string training_text(const JobPlan& plan, std::int64_t batch) {
  return "the training step " + format_bytes(plan.training_bytes) + " (batch " + std::to_string(batch) +
         ", peak in use " + format_bytes(plan.training.peak_in_use_bytes) + ")";
}

std::string pipelines_text(const JobPlan& plan) {
  std::string text;
  for (const PipelineShare& p : plan.pipelines) {
    text += (text.empty() ? "" : " + ") + p.needs.name + " " + format_bytes(p.needs.minimum_bytes()) + " (" +
            p.needs.explain_minimum() + ")";
  }
  return text;
}

// Checks the limits against the minimums; fills `failure` when they do not hold.
void check_minimums(const JobConfig& config, JobPlan& plan) {
  const std::int64_t batch = config.train.batch;
  if (plan.hand_split && !plan.training.fits) {
    plan.fits = false;
    plan.failure = "the training step does not fit its share (" + format_bytes(plan.training_bytes) +
                   ", --memory): planner: " + plan.training.failure + "; give it a larger share, or lower its peak (" +
                   flags_to_lower_training() + ")";
    return;
  }
  std::uint64_t pipelines = 0;
  for (const PipelineShare& p : plan.pipelines) pipelines += p.needs.minimum_bytes();
  const std::string offload =
      plan.offload_bytes > 0 ? " + the offloaded optimizer state " + format_bytes(plan.offload_bytes) : std::string();
  const std::string lower = "lower the training step's peak (" + flags_to_lower_training() +
                            ") or the pipelines' (fewer --loader-threads, a smaller batch)";
  if (plan.separate_host()) {
    if (plan.training_bytes > plan.memory_limit || !plan.training.fits) {
      plan.fits = false;
      plan.failure = "the training step needs " + format_bytes(plan.training_bytes) + " of the device (batch " +
                     std::to_string(batch) + "), above --memory-limit " + format_bytes(plan.memory_limit) +
                     ": raise it to " + format_bytes(plan.training_bytes) + " (" +
                     std::to_string(plan.training_bytes) + " bytes), or lower its peak (" + flags_to_lower_training() + ")";
      return;
    }
    const std::uint64_t host = pipelines + plan.offload_bytes;
    if (plan.host_memory_limit != 0 && host > plan.host_memory_limit) {
      plan.fits = false;
      plan.failure = "the host side needs at least " + format_bytes(host) + ": " + pipelines_text(plan) + offload +
                     "; --host-memory-limit is " + format_bytes(plan.host_memory_limit) + ": raise it to " +
                     format_bytes(host) + " (" + std::to_string(host) + " bytes), or " + lower;
    }
    return;
  }
  const std::uint64_t need = plan.training_bytes + pipelines + plan.offload_bytes;
  if (need > plan.memory_limit || !plan.training.fits) {
    plan.fits = false;
    plan.failure = "the job needs at least " + format_bytes(need) + ": " + training_text(plan, batch) + " + " +
                   pipelines_text(plan) + offload + "; --memory-limit is " + format_bytes(plan.memory_limit) +
                   ": raise it to " + format_bytes(need) + " (" + std::to_string(need) + " bytes), or " + lower;
  }
}

// The rest of the pipelines' budget: start slots, then caches (step 3 at the top of the header).
void spend_the_rest(JobPlan& plan) {
  const std::uint64_t limit = plan.separate_host() ? plan.host_memory_limit : plan.memory_limit;
  if (limit == 0) {
    plan.unused_reason = "the host side is unbounded (no --host-memory-limit): no cache is planned";
    return;
  }
  std::uint64_t rest = limit - std::min(limit, plan.host_bytes());
  for (PipelineShare& p : plan.pipelines) {
    const std::uint64_t slots = p.needs.slot_bytes == 0 ? 0 : rest / p.needs.slot_bytes;
    p.prefetch_bytes = std::min<std::uint64_t>(slots, static_cast<std::uint64_t>(p.needs.start_slots)) * p.needs.slot_bytes;
    rest -= p.prefetch_bytes;
  }
  bool cache_short = false;
  bool any_cacheable = false;
  for (PipelineShare& p : plan.pipelines) {
    if (p.needs.passes < 2 || p.needs.cache_set_bytes == 0) continue;
    any_cacheable = true;
    p.cache_bytes = std::min(rest, p.needs.cache_set_bytes);
    rest -= p.cache_bytes;
    cache_short = cache_short || p.cache_bytes < p.needs.cache_set_bytes;
  }
  plan.unused_bytes = rest;
  if (cache_short) {
    plan.unused_reason = "the caches took it all and still do not hold every data set";
  } else if (any_cacheable) {
    plan.unused_reason = "every data set read more than once is cached whole; the autotuner may deepen prefetch into it";
  } else {
    plan.unused_reason = "no data set is read more than once, so a cache would never be read; the autotuner may deepen "
                         "prefetch into it";
  }
}

}  // namespace

JobPlan plan_job(const JobConfig& config) {
  if (config.memory_limit == 0) throw Error(ErrorCode::kInvalidArgument, "the job's memory limit must be > 0");
  if (!config.device.is_cuda() && config.host_memory_limit != 0) {
    throw Error(ErrorCode::kInvalidArgument, "a host memory limit is for a CUDA device; on the CPU the memory limit "
                                             "holds the whole process (--memory-limit alone)");
  }
  JobPlan plan;
  plan.device = config.device;
  plan.memory_limit = config.memory_limit;
  plan.host_memory_limit = config.host_memory_limit;
  // The device's backend is planned (CUDA's workspaces need no GPU), so a CUDA job's training share
  // holds what the run's backend will allocate.
  const PlanConfig pc{.train = config.train, .device = config.device, .threads = config.threads,
                      .eval_batch = config.eval_batch, .epochs = config.epochs};
  for (const PipelineNeeds& n : config.pipelines ? config.pipelines(config.train.batch) : std::vector<PipelineNeeds>{}) {
    plan.pipelines.push_back(PipelineShare{.needs = n});
  }
  std::uint64_t pipelines = 0;
  for (const PipelineShare& p : plan.pipelines) pipelines += p.needs.minimum_bytes();
  if (config.train.offload) {
    PlanConfig unbounded = pc;
    unbounded.allocator = AllocatorOptions{};
    plan.offload_bytes = plan_peak(unbounded).offload_reserved_bytes;
    ++plan.dry_runs;
  }
  const std::uint64_t others = plan.separate_host() ? 0 : pipelines + plan.offload_bytes;
  const std::uint64_t room = config.memory_limit - std::min(config.memory_limit, others);
  plan_training(config, pc, room, plan);
  check_minimums(config, plan);
  if (plan.fits) {
    spend_the_rest(plan);
    if (plan.separate_host()) plan.device_unused_bytes = plan.memory_limit - plan.training_bytes;
  }
  return plan;
}

std::string JobPlan::explain() const {
  auto line = [](const std::string& part, std::uint64_t bytes, std::uint64_t of, const std::string& what) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%5.1f%%", of == 0 ? 0.0 : 100.0 * static_cast<double>(bytes) / static_cast<double>(of));
    char head[96];
    std::snprintf(head, sizeof head, "    %-22s %10s  %s  ", part.c_str(), format_bytes(bytes).c_str(),
                  of == 0 ? "     -" : pct);
    return std::string(head) + what + "\n";
  };
  const std::uint64_t host_limit = separate_host() ? host_memory_limit : memory_limit;
  std::string text;
  std::string training_what = (hand_split ? "the allocator as --memory gives it" : "one allocator region, the tightest the "
                                                                                   "dry run fits") +
                              std::string("; peak in use ") + format_bytes(training.peak_in_use_bytes);
  if (separate_host()) {
    text += "  device, --memory-limit " + format_bytes(memory_limit) + ":\n";
    text += line("training", training_bytes, memory_limit, training_what);
    text += line("unused", device_unused_bytes, memory_limit, "the device's rest");
    text += "  host, --host-memory-limit " + (host_memory_limit ? format_bytes(host_memory_limit) : std::string("none")) + ":\n";
  } else {
    text += "  --memory-limit " + format_bytes(memory_limit) + ":\n";
    text += line("training", training_bytes, memory_limit, training_what);
  }
  if (offload_bytes > 0) text += line("offloaded state", offload_bytes, host_limit, "the optimizer's state in host memory");
  for (const PipelineShare& p : pipelines) {
    text += line(p.needs.name, p.needs.minimum_bytes(), host_limit, "minimum: " + p.needs.explain_minimum());
    if (p.prefetch_bytes > 0) {
      text += line("  + prefetch", p.prefetch_bytes, host_limit,
                   std::to_string(p.prefetch_bytes / std::max<std::uint64_t>(1, p.needs.slot_bytes)) +
                       " batch slot(s) beyond the minimum");
    }
    if (p.cache_bytes > 0) {
      char share[64];
      std::snprintf(share, sizeof share, "%.0f%%", 100.0 * static_cast<double>(p.cache_bytes) /
                                                       static_cast<double>(std::max<std::uint64_t>(1, p.needs.cache_set_bytes)));
      text += line("  + cache", p.cache_bytes, host_limit,
                   "decoded images: " + std::string(share) + " of the data set's " + format_bytes(p.needs.cache_set_bytes));
    }
  }
  if (fits) text += line("unused", unused_bytes, host_limit, unused_reason);
  return text;
}

// ---- run time -------------------------------------------------------------------------------

JobBudgets::JobBudgets(const JobPlan& plan) {
  device = std::make_shared<MemoryBudget>(plan.memory_limit);
  host = plan.separate_host() ? std::make_shared<MemoryBudget>(plan.host_memory_limit) : device;
}

std::shared_ptr<MemoryBudget> JobBudgets::pipeline_part() const { return std::make_shared<MemoryBudget>(0, host); }

std::unique_ptr<Allocator> JobBudgets::make_training_allocator(const JobPlan& plan) const {
  return std::make_unique<Allocator>(
      make_budgeted_backing(make_backing(plan.device), device,
                            BudgetedBackingOptions{.use = MemoryUse::kTraining, .floor = plan.training_bytes}),
      plan.allocator);
}

}  // namespace sluice::train
