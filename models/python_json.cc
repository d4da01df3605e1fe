#include "models/python_json.h"

#include <array>
#include <limits>
#include <string>

namespace headroom {
namespace {

// A JSON string no config holds (it starts with U+0001), standing for one literal while
// nlohmann::json parses the rest; replaced by its number afterwards.
constexpr std::string_view kMark = "\x01headroom-python-json:";

struct Literal {
  std::string_view text;
  std::string_view name;
  double value;
};
constexpr std::array<Literal, 3> kLiterals{{
    {"-Infinity", "-inf", -std::numeric_limits<double>::infinity()},
    {"Infinity", "+inf", std::numeric_limits<double>::infinity()},
    {"NaN", "nan", std::numeric_limits<double>::quiet_NaN()},
}};

// The text with each literal outside a string replaced by its marked string; empty when
// there is none (the text is parsed as it is, and error offsets stay exact).
std::string Rewritten(std::string_view text) {
  std::string out;
  bool any = false, in_string = false, escaped = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else {
      const Literal* found = nullptr;
      for (const Literal& l : kLiterals) {
        if (text.substr(i).starts_with(l.text)) {
          found = &l;
          break;
        }
      }
      if (found) {
        out += "\"\\u0001";
        out += kMark.substr(1);
        out += found->name;
        out += '"';
        i += found->text.size();
        any = true;
        continue;
      }
    }
    out += c;
    ++i;
  }
  return any ? out : std::string();
}

void RestoreLiterals(nlohmann::json& value) {
  if (value.is_structured()) {
    for (nlohmann::json& child : value) RestoreLiterals(child);
    return;
  }
  if (!value.is_string()) return;
  const std::string& s = value.get_ref<const std::string&>();
  if (!s.starts_with(kMark)) return;
  // A copy: assigning the number frees the string the name was read from.
  const std::string name = s.substr(kMark.size());
  for (const Literal& l : kLiterals) {
    if (name == l.name) {
      value = l.value;
      return;
    }
  }
}

}  // namespace

nlohmann::json ParsePythonJson(std::string_view text) {
  const std::string rewritten = Rewritten(text);
  if (rewritten.empty()) return nlohmann::json::parse(text);
  nlohmann::json root = nlohmann::json::parse(rewritten);
  RestoreLiterals(root);
  return root;
}

}  // namespace headroom
