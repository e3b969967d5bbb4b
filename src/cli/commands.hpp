// The subcommands of the `sluice` command line. Each registers itself on the app with its options
// and a callback; main.cpp only wires them together and turns exceptions into exit codes.
#pragma once

namespace CLI {
class App;
}

namespace sluice::cli {

// Exit codes shared by every command: 0 success, 1 a failure (the message says which input and
// why), 2 a usage error (bad or missing options), 128 + the signal when a signal stopped it (130
// for Ctrl-C, 143 for SIGTERM: InterruptGuard::exit_status).
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// `sluice prepare <dataset> --out DIR`: a public dataset as a JPEG image folder (prepare.cpp).
void add_prepare_command(CLI::App& app);
// `sluice prepare shards --data DIR --out DIR`: an image folder as tar shards, registered on the
// prepare command (prepare_shards.cpp).
void add_prepare_shards_command(CLI::App& prepare);

// `sluice inspect DIR`: files, classes, sizes, dimensions and bad files of an image folder
// (inspect.cpp).
void add_inspect_command(CLI::App& app);

// `sluice bench --data DIR ...`: throughput, stage times, peak memory and a checksum of every
// batch (bench.cpp).
void add_bench_command(CLI::App& app);

// `sluice sweep --data DIR --budgets ... --out DIR`: throughput and memory across budgets, each
// budget a fresh `sluice bench` process (sweep.cpp).
void add_sweep_command(CLI::App& app);

// `sluice train --dataset fashion-mnist | --data DIR ...`: trains a model of the training core
// on batches from sluice pipelines; loss, accuracy, images/s and memory by category (train.cpp).
void add_train_command(CLI::App& app);

// `sluice plan --model M --batch B ...`: the training allocator's peak in use that `sluice train`
// with the same flags would reach, predicted by a dry run (plan.cpp).
void add_plan_command(CLI::App& app);

}  // namespace sluice::cli

