// Included by the headers in planner/simulate/internal/: the simulator's own, used by
// planner/simulate/ and by tests only.
#pragma once

#include "planner/core/layering.h"

static_assert(HEADROOM_PLANNER_LAYER == HEADROOM_LAYER_SIMULATE || HEADROOM_PLANNER_LAYER == 1000,
              "planner/simulate/internal/ is private to planner/simulate/");
