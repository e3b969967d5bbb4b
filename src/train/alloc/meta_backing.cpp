// The planner's backing (backing.hpp): address space without memory. Regions are mmap'd with
// MAP_NORESERVE, so the allocator can carve them as usual while no page is committed until
// something writes to it, which on the meta backend nothing does.
#include <sys/mman.h>

#include "sluice/train/backing.hpp"

namespace sluice {
namespace {

class AddressSpaceBacking final : public Backing {
 public:
  DeviceId device() const override { return host(); }
  std::string describe() const override { return "address space (mmap MAP_NORESERVE, for planning)"; }
  void* allocate(std::size_t bytes) override {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;  // page-aligned, so 256-aligned
  }
  void deallocate(void* ptr, std::size_t bytes) noexcept override { ::munmap(ptr, bytes); }
};

}  // namespace

std::unique_ptr<Backing> make_address_space_backing() { return std::make_unique<AddressSpaceBacking>(); }

}  // namespace sluice
