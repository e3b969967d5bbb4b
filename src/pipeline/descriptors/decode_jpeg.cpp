// decode() / decode_jpeg(): image files (JPEG, PNG, WebP, GIF, BMP, PNM, TIFF, told apart by their
// first bytes) into 8-bit RGB or grey images (stages/decode/: jpeg_decoder.cpp, image_decoder.cpp).
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

void check(const spec::Stage& stage, const std::string& where) {
  if (std::get<spec::DecodeJpeg>(stage).options.max_image_pixels == 0) {
    refuse(where + ": max_image_pixels must be > 0");
  }
}

// "strict", or the key it replaced: specs written before it say "accept_warnings", which meant its
// opposite, and mean what they said (an old spec's "accept_warnings": false stays strict).
bool read_strict(const Object& o) {
  const json* legacy = o.find("accept_warnings");
  const bool strict = o.flag("strict", legacy != nullptr && !as_bool(*legacy, o.path("accept_warnings")));
  if (legacy != nullptr && o.find("strict") != nullptr && strict == as_bool(*legacy, o.path("accept_warnings"))) {
    bad(o.path("accept_warnings") + ": contradicts strict (accept_warnings is the old name of !strict; give strict alone)");
  }
  return strict;
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"color", "fast_dct", "fast_upsample", "fast_upsample_when_shrunk", "dct_scaling", "roi",
                        "strict", "accept_warnings", "max_image_pixels", "orientation"});
  DecodeOptions d;
  d.color = o.get("color", d.color, [](const json& c, const std::string& cp) {
    return as_choice<Color>(c, cp, {{"rgb", Color::kRGB}, {"grey", Color::kGrey}, {"gray", Color::kGrey}});
  });
  d.fast_dct = o.flag("fast_dct", d.fast_dct);
  d.fast_upsample = o.flag("fast_upsample", d.fast_upsample);
  d.fast_upsample_when_shrunk = o.flag("fast_upsample_when_shrunk", d.fast_upsample_when_shrunk);
  d.dct_scaling = o.flag("dct_scaling", d.dct_scaling);
  d.roi = o.flag("roi", d.roi);
  d.strict = read_strict(o);
  d.max_image_pixels = o.get("max_image_pixels", d.max_image_pixels, [](const json& m, const std::string& mp) {
    return static_cast<std::uint64_t>(as_integer(m, mp, 1, INT64_MAX, "a positive integer"));
  });
  d.orientation = o.get("orientation", d.orientation, [](const json& c, const std::string& cp) {
    return as_choice<Orientation>(c, cp, {{"as_stored", Orientation::kAsStored}, {"exif", Orientation::kExif}});
  });
  return spec::DecodeJpeg{d};
}

ordered_json write(const spec::Stage& stage) {
  const DecodeOptions& d = std::get<spec::DecodeJpeg>(stage).options;
  return {{"color", d.color == Color::kGrey ? "grey" : "rgb"}, {"fast_dct", d.fast_dct},
          {"fast_upsample", d.fast_upsample}, {"fast_upsample_when_shrunk", d.fast_upsample_when_shrunk},
          {"dct_scaling", d.dct_scaling}, {"roi", d.roi},
          {"strict", d.strict}, {"max_image_pixels", d.max_image_pixels},
          {"orientation", d.orientation == Orientation::kExif ? "exif" : "as_stored"}};
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::DecodeJpeg>() {
  static const StageDescriptor d{
      .name = "decode",
      .order = {.allowed = {Phase::kRead}, .enters = Phase::kDecoded, .misplaced = "decode() must follow read(), once"},
      .check = check,
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
