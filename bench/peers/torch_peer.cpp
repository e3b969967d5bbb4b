// Running the torch peer as a subprocess and parsing its report.
#include "torch_peer.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::bench {
namespace {

// Single-quoted for /bin/sh: the paths come from the command line and may hold spaces.
std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

TorchPeerResult run_torch_peer(const std::string& list_file, const Scenario& scenario,
                               const TorchPeerOptions& options) {
  const std::vector<std::string> args = {
      options.python, options.script, "--list", list_file,
      "--transform", std::string(to_string(scenario.transform)),
      "--size", std::to_string(scenario.size),
      "--batch", std::to_string(scenario.batch),
      "--workers", std::to_string(scenario.threads),
      "--epochs", std::to_string(scenario.epochs),
      "--seed", std::to_string(scenario.seed)};
  std::string command;
  for (const std::string& a : args) command += shell_quote(a) + ' ';

  // The child's stdout may hold warnings before the report; the report is its last JSON line.
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot start: " + command);
  std::string output;
  std::array<char, 4096> chunk{};
  std::size_t got = 0;
  while ((got = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0) {
    output.append(chunk.data(), got);
  }
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("the torch peer failed (status " + std::to_string(status) +
                             "): " + command);
  }

  std::string last_json;
  std::size_t begin = 0;
  while (begin < output.size()) {
    std::size_t end = output.find('\n', begin);
    if (end == std::string::npos) end = output.size();
    std::string_view line(output.data() + begin, end - begin);
    if (!line.empty() && line.front() == '{') last_json = line;
    begin = end + 1;
  }
  if (last_json.empty()) throw std::runtime_error("the torch peer printed no JSON: " + command);

  const nlohmann::json report = nlohmann::json::parse(last_json);
  TorchPeerResult result;
  result.json_line = last_json;
  result.loader.images = report.at("images").get<std::int64_t>();
  result.loader.seconds = report.at("seconds").get<double>();
  result.loader.images_per_sec = report.at("images_per_sec").get<double>();
  result.loader.checksum = report.value("checksum", 0.0);
  result.torch_version = report.value("torch", std::string());
  return result;
}

}  // namespace sluice::bench
