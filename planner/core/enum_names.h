// Parsing the small enums people type on the command line and in files: one list of the
// values and the enum's Name function give both the parser and its error message.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "planner/core/result.h"

namespace headroom {

// The value whose name is `text`, else "unknown <what> '<text>' (use a, b or c)".
template <typename E, typename NameFn>
Result<E> ParseByName(std::string_view text, std::initializer_list<E> values, NameFn name_of,
                      std::string_view what) {
  std::string choices;
  size_t i = 0;
  for (E value : values) {
    if (text == name_of(value)) return value;
    choices += i == 0 ? "" : i + 1 == values.size() ? " or " : ", ";
    choices += name_of(value);
    ++i;
  }
  return MakeError(fmt::format("unknown {} '{}' (use {})", what, text, choices));
}

}  // namespace headroom
