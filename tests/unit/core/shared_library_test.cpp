// SharedLibrary, the dlopen behind the training core's BLAS tables: the first file that loads is
// taken, a library that cannot be loaded or lacks an entry point is an error that says what to do.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/shared_library.hpp"

namespace sluice::core {
namespace {

SharedLibrarySpec spec(std::vector<std::string> files) {
  return {.files = std::move(files), .name = "the C library", .need = "this test needs the C library",
          .install_hint = "reinstall libc6", .missing_symbol_hint = "a foreign libc?"};
}

TEST(SharedLibrary, TakesTheFirstFileThatLoadsAndResolvesItsEntryPoints) {
  const SharedLibrary library(spec({"libsluice-test-absent.so.9", "libc.so.6"}));
  decltype(&std::strlen) length = nullptr;
  library.resolve(length, "strlen");
  ASSERT_NE(length, nullptr);
  EXPECT_EQ(length("sluice"), 6u);
}

TEST(SharedLibrary, NoFileThatLoadsNamesEachFailureAndWhatToDo) {
  try {
    const SharedLibrary library(spec({"libsluice-test-absent.so.9", "libsluice-test-absent.so"}));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(what.find("this test needs the C library, which could not be loaded"), std::string::npos) << what;
    EXPECT_NE(what.find("libsluice-test-absent.so.9"), std::string::npos) << what;
    EXPECT_NE(what.find("libsluice-test-absent.so:"), std::string::npos) << what;
    EXPECT_NE(what.find("reinstall libc6"), std::string::npos) << what;
  }
}

TEST(SharedLibrary, AMissingEntryPointNamesTheLibraryAndTheSymbol) {
  const SharedLibrary library(spec({"libc.so.6"}));
  void (*absent)() = nullptr;
  try {
    library.resolve(absent, "sluice_no_such_entry_point");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("the C library has no entry point sluice_no_such_entry_point (a foreign libc?)") !=
                  std::string::npos,
              true)
        << e.what();
  }
  EXPECT_EQ(absent, nullptr);
}

}  // namespace
}  // namespace sluice::core
