// The range checks the augmentation stages share (color_jitter, the warps, random_erasing,
// gaussian_blur): a [min, max] option is refused, naming the stage, the option, its bounds and the
// value it got, unless it is ordered and inside its bounds.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include "pipeline/stage_registry.hpp"

namespace sluice::schema::ranges {

// "[min, max]" as the messages print a value (six decimals, as std::to_string).
inline std::string text(const FactorRange& r) { return "[" + std::to_string(r.min) + ", " + std::to_string(r.max) + "]"; }

// A bound as a reader writes it: 0.5, 1e+06, -180.
inline std::string bound(double v) {
  char out[32];
  std::snprintf(out, sizeof out, "%g", v);
  return out;
}

// Refuses unless lo <= min <= max <= hi.
inline void check(const std::string& where, const char* name, const FactorRange& r, double lo, double hi) {
  if (!(r.min >= lo && r.min <= r.max && r.max <= hi)) {
    refuse(where + ": " + name + " must be [min, max] with " + bound(lo) + " <= min <= max <= " + bound(hi) +
           ", got " + text(r));
  }
}

// Refuses unless 0 < min <= max, max finite (scales, ratios, sigmas).
inline void check_positive(const std::string& where, const char* name, const FactorRange& r) {
  if (!(r.min > 0 && r.min <= r.max && std::isfinite(r.max))) {
    refuse(where + ": " + name + " must be [min, max] with 0 < min <= max, got " + text(r));
  }
}

}  // namespace sluice::schema::ranges
