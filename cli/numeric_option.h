// Flags whose values are numbers, parsed strictly (planner/core/number_parse.h): the
// whole text, within the flag's range; NaN, Inf, trailing text and values that do not
// fit are parse errors naming the flag, never clamped. CLI11's own conversion clamps
// 2^64 to INT64_MAX, so every numeric flag goes through these.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "planner/core/number_parse.h"

namespace headroom {

template <typename Target>  // int64_t, uint64_t-compatible or std::optional<int64_t>
CLI::Option* AddIntegerOption(CLI::App& cmd, const std::string& flag, Target& target, int64_t lo,
                              int64_t hi, const std::string& help) {
  auto store = [&target, flag, lo, hi](const std::string& text) {
    Result<int64_t> value = ParseInteger(text, lo, hi, flag);
    if (!value) throw CLI::ValidationError(value.error().message);
    target = *value;
  };
  return cmd.add_option_function<std::string>(flag, store, help)->type_name("INT");
}

template <typename Target>  // double or std::optional<double>
CLI::Option* AddRealOption(CLI::App& cmd, const std::string& flag, Target& target, double lo,
                           double hi, const std::string& help) {
  auto store = [&target, flag, lo, hi](const std::string& text) {
    Result<double> value = ParseReal(text, lo, hi, flag);
    if (!value) throw CLI::ValidationError(value.error().message);
    target = *value;
  };
  return cmd.add_option_function<std::string>(flag, store, help)->type_name("NUMBER");
}

}  // namespace headroom
