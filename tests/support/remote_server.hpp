// The remote shard tests' server (tests/support/remote_server.py, run with Debian's
// /usr/bin/python3) started on 127.0.0.1 for one test and stopped (SIGTERM, then waited for) when
// the object goes; faults switched and counters read over plain sockets, so the tests need no
// HTTP client of their own. Header-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace sluice::test {

class RemoteServer {
 public:
  explicit RemoteServer(const std::filesystem::path& root, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {SLUICE_SYSTEM_PYTHON, std::string(SLUICE_SOURCE_DIR) + "/tests/support/remote_server.py",
                                     "--root", root.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      throw std::runtime_error("cannot start the test server");
    }
    std::string line;
    pollfd p{out[0], POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      if (::poll(&p, 1, 200) <= 0) continue;
      char c[64];
      const ssize_t n = ::read(out[0], c, sizeof c);
      if (n <= 0) break;
      line.append(c, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    port_ = std::atoi(line.c_str());
    if (port_ <= 0) {
      stop();
      throw std::runtime_error("the test server did not say its port");
    }
  }
  ~RemoteServer() { stop(); }
  RemoteServer(const RemoteServer&) = delete;
  RemoteServer& operator=(const RemoteServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  // PUT /__faults: the JSON object of tests/support/remote_server.py's docstring.
  void faults(const std::string& json) const { request("PUT /__faults", json); }
  // One counter of GET /__stats.
  std::int64_t stat(const std::string& name) const {
    const std::string body = request("GET /__stats", "");
    const std::size_t at = body.find("\"" + name + "\": ");
    if (at == std::string::npos) throw std::runtime_error("no counter " + name + " in " + body);
    return std::atoll(body.c_str() + at + name.size() + 4);
  }

 private:
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::string request(const std::string& line, const std::string& body) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      throw std::runtime_error("cannot reach the test server");
    }
    const std::string text = line + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)!::write(fd, text.data(), text.size());
    std::string reply;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) reply.append(buffer, static_cast<std::size_t>(n));
    ::close(fd);
    const std::size_t split = reply.find("\r\n\r\n");
    return split == std::string::npos ? std::string() : reply.substr(split + 4);
  }

  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace sluice::test
