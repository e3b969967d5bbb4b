// Consumer of an installed sluice: builds a pipeline over the folder given on the command line
// and prints the number of samples it delivered.
#include <cstdio>
#include <sluice/sluice.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer DIR\n");
    return 2;
  }
  try {
    sluice::Loader loader = sluice::Pipeline::from_folder(argv[1])
                                .read()
                                .decode_jpeg()
                                .resize(16, 16)
                                .normalize({.mean = {0.5f}, .std = {0.25f}, .layout = sluice::Layout::kNCHW,
                                            .dtype = sluice::DType::kF32})
                                .batch(4)
                                .build({.threads = 2});
    long samples = 0;
    for (sluice::Batch& b : loader.epoch(0)) samples += b.size();
    std::printf("samples %ld\n", samples);
    return 0;
  } catch (const sluice::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
