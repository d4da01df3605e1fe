// Every user-controlled string (a model's name, a path, a GPU or op name) is escaped for
// the format it lands in, here and nowhere else: markup (SVG and HTML), CSV, and the
// terminal. A name cannot run script in a report, break its XML, start a formula in a
// spreadsheet, or move the cursor and rewrite what the terminal shows.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace headroom {

// Text or an attribute value in SVG or HTML: & < > " ' as entities; bytes XML 1.0 does not
// allow (controls other than tab, newline and carriage return) and invalid UTF-8 become
// U+FFFD, so the document stays well-formed whatever the name holds.
std::string MarkupEscaped(std::string_view text);
// Whether `text` is UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF): what a file that headroom reads and writes back must hold.
bool IsUtf8(std::string_view text);
// The offset of the first byte YAML does not allow in a document (`c-printable`, YAML 1.2
// 5.1: the C0 controls but tab, newline and carriage return, and DEL), if any. yaml-cpp
// reads them into strings, and a string holding one does not write back as it was read.
std::optional<size_t> FirstNonPrintableByte(std::string_view text);

// One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break, with
// quotes doubled; a field a spreadsheet would read as a formula (first character = + - @,
// a tab or a carriage return) gets a leading apostrophe (OWASP's CSV injection advice).
std::string CsvField(std::string_view text);

// For the terminal: C0 controls and DEL as \xNN, the C1 controls (U+0080-U+009F) as
// \uNNNN, so an escape sequence prints as text; anything else, UTF-8 included, is kept.
// `keep_newlines` passes '\n' (for a whole report, whose lines are its own); a name or a
// one-line message escapes it.
std::string TerminalEscaped(std::string_view text, bool keep_newlines = false);

// JSON as headroom prints and writes it: a string that is not UTF-8 (a name read from a
// YAML file) has its bad bytes as U+FFFD, where nlohmann::json's default would throw.
std::string JsonText(const nlohmann::json& value, int indent = 2);

}  // namespace headroom
