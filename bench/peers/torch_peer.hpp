// The C++ side of the PyTorch peer: runs bench/peers/torch_loader.py under Debian's python3
// (which has torch and torchvision) as a child process on the same list file, and reads back the
// JSON line it prints. Out of process because the DataLoader is Python; its own warm-up epoch
// plays the part the C++ systems' warm-up plays.
#pragma once

#include <string>

#include "image_list.hpp"
#include "scenario.hpp"

namespace sluice::bench {

struct TorchPeerOptions {
  std::string python;  // interpreter; the one with python3-torch, not the first on PATH
  std::string script;  // torch_loader.py
};

struct TorchPeerResult {
  LoaderResult loader;
  std::string torch_version;
  std::string json_line;  // what the script printed, verbatim
};

// Runs the script on list_file with scenario's transform, size, batch, threads (as DataLoader
// workers) and epochs. The child's stderr goes to ours. Throws std::runtime_error when the child
// fails or prints no JSON line.
TorchPeerResult run_torch_peer(const std::string& list_file, const Scenario& scenario,
                               const TorchPeerOptions& options);

}  // namespace sluice::bench
