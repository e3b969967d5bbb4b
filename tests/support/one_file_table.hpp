// An item table of one file, as the runtime hands SampleProgram::run one item: for the tests that
// run one sample program on one generated or real file.
#pragma once

#include <string>

#include "stages/source/item_table.hpp"

namespace sluice::test {

inline stages::ItemTable one_file(const std::string& path) {
  stages::ItemTable table;
  table.add_path(path, 0);
  table.finish();
  return table;
}

}  // namespace sluice::test
