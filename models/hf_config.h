// Import of a Hugging Face `config.json` (model_type llama, mistral, qwen2, qwen3, phi3,
// gemma2, gemma3_text, qwen3_moe, mixtral, gpt2, bert)
// into a ModelSpec. Missing fields and unsupported types are errors naming the problem.
#pragma once

#include "models/layer.h"

#include <string_view>

#include "models/model_spec.h"
#include "planner/core/result.h"

namespace headroom {

Result<ModelSpec> ParseHfConfigJson(std::string_view json_text, std::string_view origin);

}  // namespace headroom
