// The planner is a pipeline of folders, each a CMake library that may use only the
// folders before it: core -> graph -> (models/) -> simulate -> solve -> plan -> report.
// Every public header includes its folder's layer.h, which checks the including
// translation unit's layer (HEADROOM_PLANNER_LAYER, set per library by CMake), so
// including a later folder from an earlier one fails to compile. Code outside the
// pipeline (runtime/, cli/, tests/, bench/) sets no layer and may include anything.
#pragma once

#define HEADROOM_LAYER_CORE 10
#define HEADROOM_LAYER_GRAPH 20
#define HEADROOM_LAYER_MODELS 25
#define HEADROOM_LAYER_SIMULATE 30
#define HEADROOM_LAYER_SOLVE 40
#define HEADROOM_LAYER_PLAN 50
#define HEADROOM_LAYER_REPORT 60

#ifndef HEADROOM_PLANNER_LAYER
#define HEADROOM_PLANNER_LAYER 1000  // outside the pipeline
#endif
