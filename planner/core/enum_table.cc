#include "planner/core/enum_table.h"

namespace headroom {

std::string ChoiceList(const std::vector<std::string>& names, std::string_view separator,
                       std::string_view last_separator) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? last_separator : separator;
    out += names[i];
  }
  return out;
}

}  // namespace headroom
