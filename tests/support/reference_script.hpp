// Runs a script of tests/reference/ under the Python that has torch, torchvision and Pillow
// (SLUICE_SYSTEM_PYTHON, /usr/bin/python3), capturing what it prints: the one place for the
// command line, its quoting and the exit status, for every test held to a Python reference.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

namespace sluice::test {

struct ScriptRun {
  bool started = false;  // false: the interpreter could not be started at all
  int exit_code = -1;    // -1 when the script did not exit normally
  std::string output;    // stdout and stderr together
  bool ok() const { return started && exit_code == 0; }
};

// `script` is a file name under tests/reference/; each argument is passed as one word.
// `python_options` go before the script (e.g. "-W", "ignore").
inline ScriptRun run_reference_script(const std::string& script, const std::vector<std::string>& args,
                                      const std::vector<std::string>& python_options = {}) {
  const auto quoted = [](const std::string& word) { return "'" + word + "'"; };
  std::string command = quoted(SLUICE_SYSTEM_PYTHON);
  for (const std::string& option : python_options) command += " " + quoted(option);
  command += " " + quoted(std::string(SLUICE_SOURCE_DIR) + "/tests/reference/" + script);
  for (const std::string& arg : args) command += " " + quoted(arg);
  command += " 2>&1";
  ScriptRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  run.started = true;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) run.output += buf;
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace sluice::test
