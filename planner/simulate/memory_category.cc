#include "planner/simulate/memory_category.h"

namespace headroom {

std::string_view CategoryName(Category c) {
  switch (c) {
    case Category::kWeights:
      return "weights";
    case Category::kWeightCasts:
      return "weight_casts";
    case Category::kGradients:
      return "gradients";
    case Category::kOptimizer:
      return "optimizer";
    case Category::kActivations:
      return "activations";
    case Category::kTemporaries:
      return "temporaries";
  }
  return "?";
}

}  // namespace headroom
