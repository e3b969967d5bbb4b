// Reading and writing JSON fields with messages that name the field by its JSON path: shared by
// the document parser and writer (json_spec.cpp, json_spec_writer.cpp) and every stage's
// descriptor (descriptors/), whose StageJson reads and writes the stage's options. Private to the
// pipeline module, which alone uses the JSON library.
#pragma once

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/json_limits.hpp"
#include "sluice/core/device_id.hpp"
#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/spec.hpp"

namespace sluice::schema {

// A stage's JSON form, {"name": {options}}: reads the options object (`path` is its JSON path,
// "stages[2].random_crop") and writes every option out, so that reading gives the stage back.
struct StageJson {
  spec::Stage (*read)(const nlohmann::json& options, const std::string& path);
  nlohmann::ordered_json (*write)(const spec::Stage& stage);
};

}  // namespace sluice::schema

namespace sluice::json_fields {

using nlohmann::json;
using nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& message);
// What a bad value was, short enough for one line of a message.
std::string describe(const json& value);
[[noreturn]] void expected(const std::string& path, const std::string& what, const json& got);
std::string join(const std::vector<std::string>& names);

std::int64_t as_integer(const json& v, const std::string& path, std::int64_t min, std::int64_t max,
                        const std::string& what);
int as_positive_int(const json& v, const std::string& path);
std::uint64_t as_seed(const json& v, const std::string& path);
double as_number(const json& v, const std::string& path, double min, double max, const std::string& what);
bool as_bool(const json& v, const std::string& path);
std::string as_string(const json& v, const std::string& path);
// Byte sizes: a number of bytes or a string with a unit ("4GiB", "512MB").
std::uint64_t as_size(const json& v, const std::string& path);
DeviceId as_device(const json& v, const std::string& path);

// One of a few names, case-insensitive.
template <class T>
T as_choice(const json& v, const std::string& path, std::initializer_list<std::pair<const char*, T>> choices) {
  std::vector<std::string> names;
  for (const auto& c : choices) names.emplace_back(c.first);
  const std::string what = "one of " + join(names);
  if (!v.is_string()) expected(path, what, v);
  std::string s = v.get<std::string>();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& c : choices) {
    if (s == c.first) return c.second;
  }
  expected(path, what, v);
}

// An object whose keys must all be known; fields are read by key with their full path.
class Object {
 public:
  Object(const json& value, std::string path, std::initializer_list<const char*> known)
      : value_(value), path_(std::move(path)) {
    if (value_.is_null()) return;  // {"read": null} reads as {"read": {}}
    if (!value_.is_object()) expected(path_, "an object", value_);
    for (const auto& [key, unused] : value_.items()) {
      if (std::none_of(known.begin(), known.end(), [&key = key](const char* k) { return key == k; })) {
        std::vector<std::string> names(known.begin(), known.end());
        bad(path_ + ": unknown key " + json_limits::quote(key) + " (known: " + join(names) + ")");
      }
    }
  }

  const json* find(const char* key) const {
    if (!value_.is_object()) return nullptr;
    const auto it = value_.find(key);
    return it == value_.end() ? nullptr : &*it;
  }
  std::string path(const char* key) const { return path_ + "." + key; }
  const std::string& path() const { return path_; }

  // The field, or the fallback when absent.
  template <class T, class Read>
  T get(const char* key, T fallback, Read read) const {
    const json* v = find(key);
    return v == nullptr ? fallback : read(*v, path(key));
  }
  template <class T, class Read>
  T require(const char* key, const std::string& what, Read read) const {
    const json* v = find(key);
    if (v == nullptr) bad(path(key) + ": missing (expected " + what + ")");
    return read(*v, path(key));
  }
  int positive(const char* key) const { return require<int>(key, "a positive integer", as_positive_int); }
  int positive(const char* key, int fallback) const { return get(key, fallback, as_positive_int); }
  bool flag(const char* key, bool fallback) const { return get(key, fallback, as_bool); }
  std::optional<std::uint64_t> seed(const char* key = "seed") const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return as_seed(*v, path(key));
  }

 private:
  const json& value_;
  std::string path_;
};

// "size" (square) or "width" and "height", as the builder's overloads take them.
std::pair<int, int> read_extent(const Object& o);
ResizeOptions read_resize(const Object& o);
// [min, max] with 0 < min <= max.
std::pair<double, double> read_range(const json& v, const std::string& path);
enum class Sign : std::uint8_t { kAny, kPositive };
std::vector<float> read_floats(const json& v, const std::string& path, Sign sign);

// A warp's "interpolation" ("nearest", "bilinear"), "fill" (0-255, or one per channel) and "seed".
WarpOptions read_warp(const Object& o);
// A range [min, max] of numbers inside [lo, hi]; a single number x >= 0 reads as [center - x, center + x]
// (torchvision's degrees and sigma style: `single` says which).
enum class Single : std::uint8_t { kSymmetric, kFixed };
FactorRange read_number_range(const json& v, const std::string& path, double lo, double hi, Single single);

// The writer's side: the same spellings.
void write_warp(ordered_json& j, const WarpOptions& w);
ordered_json write_range(const FactorRange& r);
const char* name_of(Filter filter);
void write_extent(ordered_json& j, int width, int height);
void write_resize(ordered_json& j, const ResizeOptions& r);
void write_seed(ordered_json& j, const std::optional<std::uint64_t>& seed);

}  // namespace sluice::json_fields
