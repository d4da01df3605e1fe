// JSON as Python's json module writes it, which is what transformers' save_pretrained
// writes: json.dumps emits float('inf'), float('-inf') and float('nan') as the bare
// literals Infinity, -Infinity and NaN (allow_nan=True, its default), and transformers
// reads them back. Strict JSON and nlohmann::json refuse them; Granite-4 and Nemotron-H
// configs carry one ("time_step_limit": [0.0, Infinity]).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace headroom {

// Parses `text`, the three literals included (outside strings) as the non-finite doubles
// Python means by them. Throws nlohmann::json's exceptions as json::parse does; byte
// offsets in them count the text as rewritten when it held one of the literals.
nlohmann::json ParsePythonJson(std::string_view text);

}  // namespace headroom
