// `sluice sweep`: throughput against the RAM budget. For each budget it runs `sluice bench` in a
// fresh process (so each peak resident memory is that budget's alone), the first epoch cold (the
// data set's pages dropped from the OS cache) and the later ones warm, and reports per-epoch
// images/s, peak RSS, accounted peak and cache hit rate: a table on stdout, DIR/sweep.csv, and
// DIR/sweep.png (plotted with Debian's python3-matplotlib, skipped with a warning without it).
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/console.hpp"
#include "pipeline/json_text.hpp"
#include "cli/number_flags.hpp"
#include "sluice/detail/core/atomic_file.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct SweepOptions {
  std::string data;
  std::string list;
  std::string shards;
  std::string budgets = "256MiB,512MiB,1GiB";
  std::string cache = "memory";
  std::string transform = "eval";
  int size = 224;
  int batch = 64;
  int epochs = 3;
  std::string threads = "auto";
  bool force = false;  // replace files at DIR/sweep.csv and DIR/sweep.png that a sweep did not write
  std::string out;
};

// The plot, embedded so an installed binary needs no data files: throughput per epoch (cold and
// warm) and peak memory against the budget.
constexpr const char* kPlotScript = R"PY(
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
mib = lambda v: float(v) / 2**20
budgets = sorted({int(r["budget_bytes"]) for r in rows})
epochs = sorted({int(r["epoch"]) for r in rows})
fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
for e in epochs:
    pts = sorted((int(r["budget_bytes"]), float(r["images_per_sec"])) for r in rows if int(r["epoch"]) == e)
    top.plot([mib(b) for b, _ in pts], [v for _, v in pts], marker="o",
             label="epoch %d (%s)" % (e, "cold" if e == 0 else "warm"))
top.set_ylabel("images/s")
top.set_title(sys.argv[3])
top.legend()
top.grid(alpha=0.3)
first = {int(r["budget_bytes"]): r for r in rows if int(r["epoch"]) == 0}
bottom.plot([mib(b) for b in budgets], [mib(first[b]["peak_rss_above_baseline"]) for b in budgets], marker="o", label="peak RSS above baseline")
bottom.plot([mib(b) for b in budgets], [mib(first[b]["accounted_peak"]) for b in budgets], marker="s", label="accounted peak")
bottom.plot([mib(b) for b in budgets], [mib(b) for b in budgets], linestyle="--", color="grey", label="budget")
bottom.set_xlabel("memory budget (MiB)")
bottom.set_ylabel("MiB")
bottom.legend()
bottom.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110, format="png")
)PY";

// Runs this executable with `args` and returns its stdout; throws with its stderr on failure.
std::string run_self(const std::vector<std::string>& args) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw Error(ErrorCode::kIo, "sweep: pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::kIo, "sweep: fork failed");
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    std::vector<char*> argv;
    static std::string self = "/proc/self/exe";
    argv.push_back(self.data());
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  std::string out;
  std::string err;
  char buf[4096];
  // stderr is small (errors only, no progress line since it is a pipe): read stdout first.
  for (ssize_t n; (n = read(out_pipe[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  for (ssize_t n; (n = read(err_pipe[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(ErrorCode::kInvalidArgument, "sweep: a run failed: " + err);
  }
  return out;
}

std::vector<std::uint64_t> parse_budgets(const std::string& text) {
  std::vector<std::uint64_t> budgets;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    const auto bytes = parse_size(part);
    if (!bytes || *bytes == 0) throw Error(ErrorCode::kInvalidArgument, "--budgets: cannot read \"" + part + "\" as a size");
    budgets.push_back(*bytes);
  }
  if (budgets.empty()) throw Error(ErrorCode::kInvalidArgument, "--budgets needs at least one size");
  return budgets;
}

constexpr std::string_view kCsvHeader =
    "budget_bytes,epoch,images_per_sec,cache_hit_rate,peak_rss_above_baseline,accounted_peak,cache_bytes\n";

// The sweep's two files: only a sweep's own CSV and a matplotlib PNG are replaced, unless --force.
core::OutputFile csv_output(const fs::path& path, bool force) {
  return core::OutputFile{.path = path.string(), .noun = "sweep CSV", .mode = 0644,
                          .is_ours = [](std::string_view head) { return head.starts_with(kCsvHeader); },
                          .force = force};
}
core::OutputFile png_output(const fs::path& path, bool force) {
  return core::OutputFile{.path = path.string(), .noun = "sweep plot", .mode = 0644,
                          .is_ours = [](std::string_view head) {
                            return head.starts_with("\x89PNG\r\n\x1a\n") && head.find("Matplotlib") != std::string_view::npos;
                          },
                          .force = force};
}

// Runs /usr/bin/python3 on the plot script (handed on its stdin, so no script file is written)
// with its arguments as argv, never through a shell: a title or path with quotes stays data.
int run_plot(const std::vector<std::string>& args) {
  int in_pipe[2];
  if (pipe(in_pipe) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    close(in_pipe[0]);
    close(in_pipe[1]);
    const int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) dup2(null_fd, 1);
    std::vector<char*> argv;
    static std::string python = "/usr/bin/python3";
    static std::string from_stdin = "-";
    argv.push_back(python.data());
    argv.push_back(from_stdin.data());
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(python.c_str(), argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  std::string_view script = kPlotScript;
  while (!script.empty()) {
    const ssize_t n = write(in_pipe[1], script.data(), script.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    script.remove_prefix(static_cast<std::size_t>(n));
  }
  close(in_pipe[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void run_sweep(const SweepOptions& o) {
  const std::vector<std::uint64_t> budgets = parse_budgets(o.budgets);
  fs::create_directories(o.out);
  const fs::path csv_path = fs::path(o.out) / "sweep.csv";
  const fs::path png = fs::path(o.out) / "sweep.png";
  // Both checked before the first budget runs, not after the last.
  core::check_output(csv_output(csv_path, o.force));
  core::check_output(png_output(png, o.force));
  std::ostringstream csv;
  csv << kCsvHeader;
  std::printf("%12s %6s %12s %10s %14s %14s %12s\n", "budget", "epoch", "images/s", "cache hit", "peak RSS+", "accounted",
              "cache");
  for (const std::uint64_t budget : budgets) {
    std::vector<std::string> args{"bench", !o.shards.empty() ? "--shards" : o.list.empty() ? "--data" : "--list",
                                  !o.shards.empty() ? o.shards : o.list.empty() ? o.data : o.list,
                                  "--transform", o.transform, "--size", std::to_string(o.size), "--batch",
                                  std::to_string(o.batch), "--epochs", std::to_string(o.epochs), "--threads",
                                  o.threads, "--cache", o.cache, "--budget", std::to_string(budget), "--shuffle",
                                  "--drop-cache", "--json"};
    std::string out;
    try {
      out = run_self(args);
    } catch (const Error& e) {
      std::printf("%12s   skipped: %s", format_bytes(budget).c_str(), e.what());
      continue;
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    // bench ends stdout with its JSON line; its paths (which may hold \udcXX escapes that
    // nlohmann refuses) do not matter here.
    const json j = json::parse(without_byte_escapes(out.substr(out.rfind('\n') + 1)));
    const std::uint64_t rss = j["peak_rss_bytes"].get<std::uint64_t>() - j["baseline_rss_bytes"].get<std::uint64_t>();
    const std::uint64_t accounted = j["memory_peak"];
    const std::uint64_t cache_bytes = j["cache"]["bytes"];
    for (const auto& e : j["per_epoch"]) {
      const int epoch = e["epoch"];
      const double rate = e["images_per_sec"];
      const double hit = e["cache_hit_rate"];
      csv << budget << "," << epoch << "," << rate << "," << hit << "," << rss << "," << accounted << "," << cache_bytes << "\n";
      std::printf("%12s %6d %12.0f %9.0f%% %14s %14s %12s\n", format_bytes(budget).c_str(), epoch, rate, 100 * hit,
                  format_bytes(rss).c_str(), format_bytes(accounted).c_str(), format_bytes(cache_bytes).c_str());
    }
    std::fflush(stdout);
  }
  core::write_file_atomically(csv_output(csv_path, o.force), csv.str());

  const std::string title = "sluice sweep: " + (!o.shards.empty() ? o.shards : o.list.empty() ? o.data : o.list) + ", " + o.transform + " " +
                            std::to_string(o.size) + ", cache " + o.cache;
  // The plot goes to the atomic writer's own temporary (created exclusively, never a planted
  // link), and is renamed into place only when matplotlib succeeded.
  core::AtomicFileWriter plot(png_output(png, o.force));
  const int rc = run_plot({csv_path.string(), plot.temp_path(), title});
  if (rc == 0) plot.commit();
  if (rc != 0) {
    std::cerr << "sluice sweep: warning: no plot (needs /usr/bin/python3 with python3-matplotlib); the CSV is at "
              << csv_path << "\n";
  }
  std::printf("wrote %s%s\n", csv_path.c_str(), rc == 0 ? (" and " + png.string()).c_str() : "");
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand("sweep", "Throughput and memory of a pipeline across memory budgets");
  auto* data = cmd->add_option("--data", options->data, "Image folder")->check(CLI::ExistingDirectory);
  auto* list = cmd->add_option("--list", options->list, "List file")->check(CLI::ExistingFile);
  auto* shards = cmd->add_option("--shards", options->shards, "Tar shards (a pattern: brace ranges, globs)");
  data->excludes(list);
  shards->excludes(data)->excludes(list);
  cmd->add_option("--budgets", options->budgets, "Comma-separated budgets, e.g. 256MiB,512MiB,1GiB")->capture_default_str();
  cmd->add_option("--cache", options->cache, "memory, memory,decoded or disk:PATH")->capture_default_str();
  cmd->add_option("--transform", options->transform, "eval, train, pad-crop or none")
      ->check(CLI::IsMember({"eval", "train", "pad-crop", "none"}))->capture_default_str();
  cmd->add_option("--size", options->size, "Output side")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--batch", options->batch, "Batch size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--epochs", options->epochs, "Epochs per budget (the first cold)")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--threads", options->threads, "Worker threads, or auto")->check(thread_count(true))->capture_default_str();
  cmd->add_flag("--force", options->force, "Replace sweep.csv and sweep.png even when they are not a sweep's own");
  cmd->add_option("--out", options->out, "Folder for sweep.csv and sweep.png")->required();
  cmd->callback([options, data, list, shards] {
    if (data->count() == 0 && list->count() == 0 && shards->count() == 0) {
      throw CLI::RequiredError("--data, --list or --shards");
    }
    run_sweep(*options);
  });
}

}  // namespace sluice::cli
