// The headers precompiled once for every test executable (tests/CMakeLists.txt, sluice_test_pch):
// what most test files include and what costs most to parse. A test still includes what it uses;
// this list only saves the parsing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sluice/sluice.hpp"
#include "test_support.hpp"
