// TransferSpares: the libcurl handles and gather buffers that the transfers of one download_all()
// take turns with, as many as run at once. A handle (with its 256 KiB receive buffer) and a gather
// buffer of its own for every transfer faulted fresh pages in for each shard and handed them back
// with munmap's TLB shootdowns (docs/remote.md, "Page faults of a cold epoch 0"). Internal to
// stages/remote (http_transport.cpp); one thread uses an instance.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace sluice::stages::remote {

class TransferSpares {
 public:
  TransferSpares() = default;
  ~TransferSpares();  // cleans up the spare handles (each out of its multi handle by then)
  TransferSpares(const TransferSpares&) = delete;
  TransferSpares& operator=(const TransferSpares&) = delete;

  // A handle given back earlier, reset (the caller sets every option its transfer needs), or a
  // new one; null when libcurl cannot make one.
  CURL* take_handle();
  void give_handle(CURL* easy);
  // A gather buffer of `bytes` given back earlier (every one this instance holds has that size),
  // or a new one, left uninitialised.
  std::unique_ptr<char[]> take_gather(std::size_t bytes);
  void give_gather(std::unique_ptr<char[]> buffer);

 private:
  std::vector<CURL*> handles_;
  std::vector<std::unique_ptr<char[]>> gathers_;
};

// The gather buffers made so far, process-wide (take_gather's new ones): the transfers of one
// download_all() make at most `connections` of them.
std::uint64_t gather_buffers_made();

}  // namespace sluice::stages::remote
