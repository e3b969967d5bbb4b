// Bad files as data: OnError::kSkip replaces them, keeps batches full, and reports each one.
//   example_skip_bad_files DIR
#include <cstdio>
#include <sluice/sluice.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    sluice::Loader loader = sluice::Pipeline::from_folder(argv[1])
                                .read()
                                .decode_jpeg()
                                .resize(64, 64)
                                .batch(16)
                                .build({.on_error = sluice::OnError::kSkip});
    std::int64_t samples = 0;
    for (sluice::Batch& batch : loader.epoch(0)) samples += batch.size();
    const sluice::Stats stats = loader.stats();
    std::printf("%lld samples, %lld replaced\n", static_cast<long long>(samples),
                static_cast<long long>(stats.skipped));
    for (const auto& s : stats.skipped_samples) std::printf("  %s: %s\n", s.path.c_str(), s.cause.c_str());
  } catch (const sluice::Error& e) {  // configuration errors, or a data set that is all bad
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
