// The shortest useful pipeline: an image folder to normalised f32 batches, eval transform.
//   example_folder_to_batches DIR
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
                                .resize_shorter(256)
                                .center_crop(224)
                                .normalize({.mean = {0.485f, 0.456f, 0.406f},
                                            .std = {0.229f, 0.224f, 0.225f},
                                            .layout = sluice::Layout::kNCHW,
                                            .dtype = sluice::DType::kF32})
                                .batch(32)
                                .build();
    for (sluice::Batch& batch : loader.epoch(0)) {
      const auto* first = static_cast<const float*>(batch.data().data);
      std::printf("batch %lld: %s, first value %.3f, first label %d\n",
                  static_cast<long long>(batch.index()), batch.data().shape.to_string().c_str(),
                  first[0], batch.labels()[0]);
    }
  } catch (const sluice::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
