// TransferSpares (transfer_spares.hpp).
#include "stages/remote/transfer_spares.hpp"

#include <atomic>
#include <utility>

namespace sluice::stages::remote {
namespace {

std::atomic<std::uint64_t> g_gather_buffers{0};  // gather_buffers_made

}  // namespace

TransferSpares::~TransferSpares() {
  for (CURL* e : handles_) curl_easy_cleanup(e);
}

CURL* TransferSpares::take_handle() {
  if (handles_.empty()) return curl_easy_init();
  CURL* e = handles_.back();
  handles_.pop_back();
  curl_easy_reset(e);
  return e;
}

void TransferSpares::give_handle(CURL* easy) {
  if (easy != nullptr) handles_.push_back(easy);
}

std::unique_ptr<char[]> TransferSpares::take_gather(std::size_t bytes) {
  if (!gathers_.empty()) {
    std::unique_ptr<char[]> b = std::move(gathers_.back());
    gathers_.pop_back();
    return b;
  }
  g_gather_buffers.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique_for_overwrite<char[]>(bytes);
}

void TransferSpares::give_gather(std::unique_ptr<char[]> buffer) {
  if (buffer) gathers_.push_back(std::move(buffer));
}

std::uint64_t gather_buffers_made() { return g_gather_buffers.load(std::memory_order_relaxed); }

}  // namespace sluice::stages::remote
