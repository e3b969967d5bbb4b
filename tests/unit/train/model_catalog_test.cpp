// The model catalog (sluice/train/models.hpp): every entry carries a factory that builds its
// input and output shapes, its defaults, and presets the presets catalog knows whose mean and std
// have one entry per input channel; the CLI's one default model follows the data set.
#include <gtest/gtest.h>

#include <set>

#include "sluice/core/error.hpp"
#include "sluice/pipeline/presets.hpp"
#include "sluice/train/models.hpp"

namespace sluice::train {
namespace {

TEST(ModelCatalog, EveryEntryIsComplete) {
  std::set<std::string> names;
  for (const ModelInfo& m : model_catalog()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_NE(m.build, nullptr) << m.name;
    EXPECT_GT(m.default_epochs, 0) << m.name;
    EXPECT_GT(m.classes, 0) << m.name;
    for (const std::string& preset : {m.train_preset, m.eval_preset}) {
      const presets::PresetEntry& p = presets::find(preset);
      EXPECT_FALSE(p.takes_size) << m.name << ": " << preset;
      const presets::Transform transform = p.make(0, {});
      const auto& normalize = std::get<spec::Normalize>(transform.stages.back());
      EXPECT_EQ(normalize.options.mean.size(), static_cast<std::size_t>(m.channels)) << m.name << ": " << preset;
    }
  }
  EXPECT_EQ(model_names(), "fashion-cnn, cifar10-separable");
}

TEST(ModelCatalog, DefaultsAndUnknownNames) {
  EXPECT_EQ(default_model("fashion-mnist").name, "fashion-cnn");
  EXPECT_EQ(default_model("").name, "cifar10-separable");
  EXPECT_EQ(model_info("fashion-cnn").default_epochs, 3);
  EXPECT_EQ(model_info("cifar10-separable").default_epochs, 15);
  try {
    (void)model_info("resnet");
    FAIL() << "an unknown model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: fashion-cnn, cifar10-separable"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice::train
