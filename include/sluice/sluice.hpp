// sluice: the one header a user includes.
#pragma once

#include "sluice/core/dtype.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/core/units.hpp"
#include "sluice/device/device.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/pipeline.hpp"
#include "sluice/pipeline/presets.hpp"
#include "sluice/pipeline/spec.hpp"
#include "sluice/pipeline/stats.hpp"
#include "sluice/runtime/loader.hpp"
