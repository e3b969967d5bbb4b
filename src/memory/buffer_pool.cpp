// BufferPool: a Boost.Lockfree queue of free buffer indices over a fixed vector of buffers.
#include "sluice/memory/buffer_pool.hpp"

#include <boost/lockfree/queue.hpp>
#include <thread>

#include "sluice/core/error.hpp"

namespace sluice {

struct BufferPool::FreeList {
  explicit FreeList(int count) : queue(static_cast<std::size_t>(count)) {}
  boost::lockfree::queue<int, boost::lockfree::fixed_sized<true>> queue;
};

BufferPool::BufferPool(int count) {
  if (count <= 0) throw Error(ErrorCode::kInvalidArgument, "BufferPool needs at least one buffer");
  buffers_.resize(static_cast<std::size_t>(count));
  free_ = std::make_unique<FreeList>(count);
  for (int i = 0; i < count; ++i) free_->queue.push(i);
}

BufferPool::~BufferPool() = default;

BufferPool::Lease BufferPool::acquire(std::size_t bytes) {
  int index = 0;
  while (!free_->queue.pop(index)) std::this_thread::yield();
  AlignedBuffer& buffer = buffers_[static_cast<std::size_t>(index)];
  const std::size_t before = buffer.capacity();
  if (before < bytes) {
    buffer.reserve(bytes);
    bytes_.fetch_add(buffer.capacity() - before, std::memory_order_relaxed);
  }
  return Lease(this, index);
}

void BufferPool::give_back(int index) noexcept { free_->queue.push(index); }

}  // namespace sluice
