// One table per enum of names people type on the command line and in files: it gives
// the name of a value, the parser (with an error listing the choices) and the choices
// for --help and CLI11's checks, so no enum's names are written twice. A value may
// appear under several names (an alias); the first is its name.
//
//   inline constexpr EnumName<Stack> kStackNames[] = {{Stack::kPytorch, "pytorch"}, ...};
//   NameIn(kStackNames, Stack::kPytorch) == "pytorch"
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/result.h"

namespace headroom {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E, size_t N>
constexpr std::string_view NameIn(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

// Every name in the table, aliases included, in order.
template <typename E, size_t N>
std::vector<std::string> NamesIn(const EnumName<E> (&table)[N]) {
  std::vector<std::string> names;
  for (const EnumName<E>& entry : table) names.emplace_back(entry.name);
  return names;
}

// "a, b or c"; with " | " for both separators, "a | b | c".
std::string ChoiceList(const std::vector<std::string>& names, std::string_view separator = ", ",
                       std::string_view last_separator = " or ");

// The value named `text`, else "unknown <what> '<text>' (use a, b or c)".
template <typename E, size_t N>
Result<E> ParseIn(const EnumName<E> (&table)[N], std::string_view text, std::string_view what) {
  for (const EnumName<E>& entry : table) {
    if (entry.name == text) return entry.value;
  }
  return MakeError("unknown " + std::string(what) + " '" + std::string(text) + "' (use " +
                   ChoiceList(NamesIn(table)) + ")");
}

}  // namespace headroom
