// Included by every header in models/: the graph builders use core/ and graph/, and only
// plan/ and the stages after it may use them (see planner/core/layering.h).
#pragma once

#include "planner/core/layering.h"

static_assert(HEADROOM_PLANNER_LAYER == HEADROOM_LAYER_MODELS ||
                  HEADROOM_PLANNER_LAYER >= HEADROOM_LAYER_PLAN,
              "models/ is used from planner/plan/ on, not from an earlier folder");
