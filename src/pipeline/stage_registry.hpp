// One descriptor per stage: everything the library knows about a stage besides its builder method
// and its spec struct, so that adding a stage is one file in src/pipeline/descriptors/ plus its
// entry in spec::Stage (include/sluice/pipeline/spec.hpp), which is the registry's list: the
// descriptor of the alternative spec::Stage holds at index i is stage_descriptors()[i].
//
// A descriptor says
//   - its name, as the builder method spells it;
//   - its ordering rule: the phases of the chain it may appear in, the phase it leaves behind,
//     whether it may appear once only;
//   - its checks of its own values (sizes, ranges), run by build() with the stage's place;
//   - its JSON reader and writer (StageJson, stage_json.hpp: the JSON library stays private to
//     this module, so the stages module sees only an opaque pointer);
//   - for an image op, its geometry contribution: what it does to a sample's mapping from output
//     to source pixels (through GeometryCanvas, which the stages module's planner implements),
//     and what it fixes of the output size before any image is seen.
// What a stage does at run time beyond geometry (reading, decoding, batching) stays with the
// stages and runtime modules that do it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/detail/core/image.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/spec.hpp"

namespace sluice::schema {

// Where a chain stands after the stages so far: the ordering rules are said in these terms.
enum class Phase : std::uint8_t {
  kStart,        // nothing read yet
  kRead,         // encoded files
  kDecoded,      // decoded images, no image op yet
  kTransformed,  // after at least one image op
  kNormalized,   // after normalize()
  kBatched,      // after batch()
};

// A set of phases, as a bit mask.
class Phases {
 public:
  constexpr Phases(std::initializer_list<Phase> phases) {
    for (Phase p : phases) bits_ |= bit(p);
  }
  static constexpr Phases all_but(Phase excluded) {
    Phases all{Phase::kStart, Phase::kRead, Phase::kDecoded, Phase::kTransformed, Phase::kNormalized,
               Phase::kBatched};
    all.bits_ &= static_cast<std::uint8_t>(~bit(excluded));
    return all;
  }
  constexpr bool contains(Phase p) const { return (bits_ & bit(p)) != 0; }

 private:
  static constexpr std::uint8_t bit(Phase p) { return static_cast<std::uint8_t>(1U << static_cast<unsigned>(p)); }
  std::uint8_t bits_ = 0;
};

struct OrderRule {
  Phases allowed;                  // phases the stage may follow
  std::optional<Phase> enters;     // the phase after it; none: it leaves the phase as it was
  bool once = false;               // a second one is refused ("only one cache() per pipeline")
  const char* misplaced = "";      // what to say when it comes in a phase outside `allowed`
};

// The stage's view of one sample's geometry while it is planned (stages/image/geometry.cpp implements
// it): the current image's size as the user sees it, and the operations an image op composes.
class GeometryCanvas {
 public:
  virtual int width() const = 0;
  virtual int height() const = 0;
  virtual void resize(int width, int height, const ResizeOptions& options) = 0;
  // Crop [left, left + width) x [top, top + height); may reach outside the image (padding).
  virtual void crop(int left, int top, int width, int height) = 0;
  virtual void flip() = 0;           // mirror left-right
  virtual void flip_vertical() = 0;  // mirror top-bottom
  virtual void set_fill(std::uint8_t fill) = 0;

 protected:
  ~GeometryCanvas() = default;
};

// What is known of the output size before any image is seen: both sides, or only the shorter
// one, or nothing; and a configuration that can never work, said for the user.
struct KnownExtent {
  std::optional<Size2> size;
  std::optional<int> shorter;
  std::optional<std::string> error;

  void fix(int width, int height) {
    size = Size2{width, height};
    shorter.reset();
  }
  // False, with `error` set, when a crop of width x height (after padding every side by `pad`)
  // cannot fit what is known of the image it follows.
  bool crop_fits(const char* name, int width, int height, int pad);
};

struct GeometryRule {
  // Composes the op into one sample's mapping; `rng` is the op's stream for this sample (keyed
  // by its seed, its place among the image ops and the sample).
  void (*plan)(const spec::Stage& stage, GeometryCanvas& canvas, CounterRng& rng);
  // Updates what is known of the output size; sets extent.error for a chain that cannot work.
  void (*analyse)(const spec::Stage& stage, KnownExtent& extent);
  // The op's own seed, when it draws random numbers and was given one (else BuildOptions::seed).
  std::optional<std::uint64_t> (*seed)(const spec::Stage& stage) = nullptr;
};

// The rule every image op (a stage with a GeometryRule) shares: after decode(), before
// normalize(), any number of them.
inline constexpr OrderRule kImageOpOrder{
    .allowed = {Phase::kDecoded, Phase::kTransformed},
    .enters = Phase::kTransformed,
    .misplaced = "image ops must come after decode() and before normalize()",
};

struct StageJson;  // stage_json.hpp

struct StageDescriptor {
  const char* name;  // a literal: the builder method's spelling
  OrderRule order;
  // Checks the stage's own values; throws sluice::Error(kInvalidArgument) starting with `where`
  // ("random_crop (stage 4): ..."). nullptr: nothing to check.
  void (*check)(const spec::Stage& stage, const std::string& where) = nullptr;
  const StageJson* json = nullptr;
  const GeometryRule* geometry = nullptr;  // image ops only
};

// Each stage's descriptor is this function's specialisation for its spec struct, defined in its
// file in src/pipeline/descriptors/. A stage in spec::Stage without one fails to link.
template <class S>
const StageDescriptor& descriptor_for();

// Every stage, in spec::Stage's order.
std::span<const StageDescriptor* const> stage_descriptors();
const StageDescriptor& descriptor_of(const spec::Stage& stage);
// The stage called `name`, or nullptr.
const StageDescriptor* find_stage(std::string_view name);

// Checks shared by descriptors; they throw sluice::Error(kInvalidArgument) starting with `where`.
[[noreturn]] void refuse(const std::string& message);
void check_extent(const std::string& where, int width, int height);  // positive, at most 2^28 pixels

// Python's round(): half to even (torchvision's sizes and offsets round so).
int round_half_even(double v);

}  // namespace sluice::schema
