// The C++ side of the Python test's value check: iterates a JSON spec's pipeline with the C++
// Loader's iterator and writes every batch's raw bytes (data, then labels) to a file, so
// test_sluice.py can compare what Python received through DLPack byte for byte.
//
//   python_reference_dump SPEC.json EPOCHS OUT.bin
//
// Stdout: one line per batch, "epoch index size data_bytes labels_bytes".
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/runtime/loader.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: python_reference_dump SPEC.json EPOCHS OUT.bin\n";
    return 2;
  }
  try {
    const sluice::PipelineDocument doc = sluice::load_pipeline_json(argv[1]);
    const std::int64_t epochs = std::stoll(argv[2]);
    std::ofstream out(argv[3], std::ios::binary | std::ios::trunc);
    if (!out) throw sluice::Error(sluice::ErrorCode::kIo, "cannot write", argv[3]);
    sluice::Loader loader = sluice::Pipeline(doc.spec).build(doc.build);
    for (std::int64_t e = 0; e < epochs; ++e) {
      for (sluice::Batch& b : loader.epoch(e)) {
        const auto data_bytes = static_cast<std::streamsize>(b.data().bytes());
        const auto labels_bytes = static_cast<std::streamsize>(b.labels().size_bytes());
        out.write(static_cast<const char*>(b.data().data), data_bytes);
        out.write(reinterpret_cast<const char*>(b.labels().data()), labels_bytes);
        std::cout << e << ' ' << b.index() << ' ' << b.size() << ' ' << data_bytes << ' ' << labels_bytes << '\n';
      }
    }
    if (!out.flush()) throw sluice::Error(sluice::ErrorCode::kIo, "write failed", argv[3]);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "python_reference_dump: " << e.what() << "\n";
    return 1;
  }
}
