// The categories every byte of a prediction is attributed to.
#pragma once

#include "planner/simulate/layer.h"

#include <array>
#include <cstdint>
#include <string_view>

#include "planner/core/enum_table.h"

namespace headroom {

enum class Category : uint8_t {
  kWeights,      // model parameters (NF4 + statistics for QLoRA base weights)
  kWeightCasts,  // AMP's 16-bit copies of fp32 weights (autocast cache) and QLoRA dequant buffers
  kGradients,    // parameter .grad tensors
  kOptimizer,    // optimizer states and fp32 master weights
  kActivations,  // forward tensors: inputs, outputs still needed, saved-for-backward
  kTemporaries,  // activation gradients, op workspaces, optimizer step temporaries, cuBLAS
                 // workspace
};
inline constexpr int kNumCategories = 6;
using CategoryBytes = std::array<int64_t, kNumCategories>;

inline constexpr EnumName<Category> kCategoryNames[] = {
    {Category::kWeights, "weights"},         {Category::kWeightCasts, "weight_casts"},
    {Category::kGradients, "gradients"},     {Category::kOptimizer, "optimizer"},
    {Category::kActivations, "activations"}, {Category::kTemporaries, "temporaries"}};
inline std::string_view CategoryName(Category c) { return NameIn(kCategoryNames, c); }

}  // namespace headroom
