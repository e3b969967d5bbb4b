// The registry: spec::Stage's alternatives, in order, each mapped to its descriptor.
#include "pipeline/stage_registry.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <variant>

#include "sluice/core/error.hpp"

namespace sluice::schema {

namespace {

template <std::size_t... I>
auto table(std::index_sequence<I...> /*unused*/) {
  return std::array<const StageDescriptor*, sizeof...(I)>{
      &descriptor_for<std::variant_alternative_t<I, spec::Stage>>()...};
}

const auto& descriptors() {
  static const auto kTable = table(std::make_index_sequence<std::variant_size_v<spec::Stage>>{});
  return kTable;
}

}  // namespace

std::span<const StageDescriptor* const> stage_descriptors() { return descriptors(); }

const StageDescriptor& descriptor_of(const spec::Stage& stage) { return *descriptors()[stage.index()]; }

const StageDescriptor* find_stage(std::string_view name) {
  // decode() reads every image format; decode_jpeg(), its older name, is the same stage.
  if (name == "decode_jpeg") name = "decode";
  const auto& all = descriptors();
  const auto it = std::find_if(all.begin(), all.end(), [name](const StageDescriptor* d) { return d->name == name; });
  return it == all.end() ? nullptr : *it;
}

void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

void check_extent(const std::string& where, int width, int height) {
  if (width <= 0 || height <= 0) {
    refuse(where + ": size must be positive, got " + std::to_string(width) + "x" + std::to_string(height));
  }
  if (static_cast<std::int64_t>(width) * height > (std::int64_t{1} << 28)) {
    refuse(where + ": output of " + std::to_string(width) + "x" + std::to_string(height) + " pixels is too large");
  }
}

int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

bool KnownExtent::crop_fits(const char* name, int width, int height, int pad) {
  const auto say = [&](const std::string& what) {
    error = std::string(name) + "(" + std::to_string(width) + "x" + std::to_string(height) + ") is larger than " +
            what + ": crop to at most that size, or resize to at least the crop first";
  };
  if (size && (width > size->width + 2 * pad || height > size->height + 2 * pad)) {
    say("the " + std::to_string(size->width + 2 * pad) + "x" + std::to_string(size->height + 2 * pad) +
        " image it follows");
    return false;
  }
  if (shorter && std::min(width, height) > *shorter + 2 * pad) {
    say("the shorter side (" + std::to_string(*shorter + 2 * pad) + ") of the image it follows");
    return false;
  }
  return true;
}

}  // namespace sluice::schema
