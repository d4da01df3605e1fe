// Flags whose values are numbers, parsed strictly (planner/core/number_parse.h): the
// whole text, within the flag's range; NaN, Inf, trailing text and values that do not
// fit are parse errors naming the flag, never clamped. CLI11's own conversion clamps
// 2^64 to INT64_MAX, so every numeric flag goes through these.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "planner/core/number_parse.h"

namespace headroom {

// `parse` maps the flag's text to a Result; its error becomes CLI11's parse error.
template <typename Target, typename Parse>
CLI::Option* AddParsedOption(CLI::App& cmd, const std::string& flag, Target& target, Parse parse,
                             const std::string& type_name, const std::string& help) {
  auto store = [&target, parse](const std::string& text) {
    auto value = parse(text);
    if (!value) throw CLI::ValidationError(value.error().message);
    target = *value;
  };
  return cmd.add_option_function<std::string>(flag, store, help)->type_name(type_name);
}

template <typename Target>  // int64_t or std::optional<int64_t>
CLI::Option* AddIntegerOption(CLI::App& cmd, const std::string& flag, Target& target, int64_t lo,
                              int64_t hi, const std::string& help) {
  auto parse = [flag, lo, hi](const std::string& text) { return ParseInteger(text, lo, hi, flag); };
  return AddParsedOption(cmd, flag, target, parse, "INT", help);
}

template <typename Target>  // double or std::optional<double>
CLI::Option* AddRealOption(CLI::App& cmd, const std::string& flag, Target& target, double lo,
                           double hi, const std::string& help) {
  auto parse = [flag, lo, hi](const std::string& text) { return ParseReal(text, lo, hi, flag); };
  return AddParsedOption(cmd, flag, target, parse, "NUMBER", help);
}

}  // namespace headroom
