// Stage names, as the builder methods spell them, for messages and statistics: each stage's
// descriptor holds its own (stage_registry.hpp).
#include "sluice/pipeline/spec.hpp"

#include "pipeline/stage_registry.hpp"

namespace sluice::spec {

const char* name_of(const Stage& stage) { return schema::descriptor_of(stage).name; }

}  // namespace sluice::spec
