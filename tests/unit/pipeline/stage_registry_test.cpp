// The stage registry (src/pipeline/stage_registry.hpp): every alternative of spec::Stage has its
// descriptor, found by index and by name; every descriptor's JSON writer and reader give the
// stage back; the image ops are the stages with a geometry rule, and share one ordering rule.
#include "pipeline/stage_registry.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <variant>

#include "sluice/core/error.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "stage_examples.hpp"

namespace sluice {
namespace {

template <std::size_t... I>
std::vector<spec::Stage> one_of_each(std::index_sequence<I...> /*unused*/) {
  return {spec::Stage(std::in_place_index<I>)...};
}

std::vector<spec::Stage> default_of_each() {
  return one_of_each(std::make_index_sequence<std::variant_size_v<spec::Stage>>{});
}

TEST(StageRegistry, ListsEveryStageOnceInSpecStagesOrder) {
  const auto all = schema::stage_descriptors();
  ASSERT_EQ(all.size(), std::variant_size_v<spec::Stage>);
  std::set<std::string> names;
  for (const spec::Stage& s : default_of_each()) {
    const schema::StageDescriptor& d = schema::descriptor_of(s);
    EXPECT_EQ(&d, all[s.index()]) << d.name;
    ASSERT_NE(d.name, nullptr);
    EXPECT_FALSE(std::string(d.name).empty());
    EXPECT_TRUE(names.insert(d.name).second) << "two stages are called " << d.name;
    EXPECT_EQ(schema::find_stage(d.name), &d) << d.name;
    EXPECT_STREQ(spec::name_of(s), d.name);
    EXPECT_NE(d.json, nullptr) << d.name << " has no JSON form";
    EXPECT_NE(std::string(d.order.misplaced), "") << d.name << " says nothing when misplaced";
  }
  EXPECT_EQ(schema::find_stage("rotate"), nullptr);
}

TEST(StageRegistry, TheExamplesCoverEveryStage) {
  std::set<std::size_t> covered;
  for (const spec::Stage& s : test::stage_examples()) covered.insert(s.index());
  for (const spec::Stage& s : default_of_each()) {
    EXPECT_EQ(covered.count(s.index()), 1U) << spec::name_of(s) << " has no example in tests/support/stage_examples.hpp";
  }
}

// Each example alone in a document: to_json writes it under its descriptor's name, and parsing
// that gives the same stage back (the same canonical text again).
TEST(StageRegistry, EveryDescriptorRoundTripsThroughJson) {
  for (const spec::Stage& s : test::stage_examples()) {
    const char* name = spec::name_of(s);
    PipelineSpec spec;
    spec.stages = {s};
    const std::string text = to_json(spec, BuildOptions{}, -1);
    EXPECT_NE(text.find("{\"" + std::string(name) + "\":{"), std::string::npos) << text;
    const PipelineDocument doc = parse_pipeline_json(text);
    ASSERT_EQ(doc.spec.stages.size(), 1U) << name;
    EXPECT_EQ(doc.spec.stages[0].index(), s.index()) << name;
    EXPECT_EQ(to_json(doc, -1), text) << name;
  }
}

// An unknown name is refused with the list of known ones, which is the registry's.
TEST(StageRegistry, UnknownStageNamesTheKnownOnes) {
  try {
    parse_pipeline_json(R"({"source": {"folder": "x"}, "stages": ["rotate"]})");
    FAIL() << "an unknown stage was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    std::string known;
    for (const schema::StageDescriptor* d : schema::stage_descriptors()) known += (known.empty() ? "" : ", ") + std::string(d->name);
    EXPECT_NE(e.cause().find("unknown stage \"rotate\" (known: " + known + ")"), std::string::npos) << e.cause();
  }
}

TEST(StageRegistry, ImageOpsAreTheStagesWithAGeometryRuleAndShareOneOrder) {
  const std::set<std::string> image_ops{"resize_shorter", "resize", "center_crop", "random_resized_crop",
                                        "random_crop", "flip_horizontal", "flip_vertical"};
  for (const schema::StageDescriptor* d : schema::stage_descriptors()) {
    const bool geometry = d->geometry != nullptr;
    EXPECT_EQ(geometry, image_ops.count(d->name) == 1) << d->name;
    if (!geometry) continue;
    EXPECT_NE(d->geometry->plan, nullptr) << d->name;
    EXPECT_NE(d->geometry->analyse, nullptr) << d->name;
    EXPECT_STREQ(d->order.misplaced, schema::kImageOpOrder.misplaced) << d->name;
    EXPECT_EQ(d->order.enters, schema::Phase::kTransformed) << d->name;
  }
}

}  // namespace
}  // namespace sluice
