// Included by every header in planner/solve/: only planner/solve/ and the folders after it
// may include them (see planner/core/layering.h).
#pragma once

#include "planner/core/layering.h"

static_assert(HEADROOM_PLANNER_LAYER >= HEADROOM_LAYER_SOLVE,
              "planner/solve/ comes later in the pipeline than the file including it");
