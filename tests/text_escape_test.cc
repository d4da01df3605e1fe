// planner/core/text_escape.h: each format's escaping, on the strings that broke reports.
#include "planner/core/text_escape.h"

#include <gtest/gtest.h>

namespace headroom {
namespace {

TEST(MarkupEscaped, EntitiesForTheFiveSpecialCharacters) {
  EXPECT_EQ(MarkupEscaped("R&D <script>alert(1)</script> \"q\" 's"),
            "R&amp;D &lt;script&gt;alert(1)&lt;/script&gt; &quot;q&quot; &#39;s");
}

TEST(MarkupEscaped, BytesXmlCannotHoldBecomeTheReplacementCharacter) {
  // ESC and BEL are not allowed in XML 1.0; 0xFF and a lone continuation byte are not
  // UTF-8; an overlong '<' (C0 BC) must not sneak a '<' past a lenient decoder.
  EXPECT_EQ(MarkupEscaped("a\x1b[31m\x07"), "a\xEF\xBF\xBD[31m\xEF\xBF\xBD");
  EXPECT_EQ(MarkupEscaped("\xff\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(MarkupEscaped("\xC0\xBC"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(MarkupEscaped("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

TEST(MarkupEscaped, KeepsUtf8AndWhitespace) {
  EXPECT_EQ(MarkupEscaped("Qwen \xE2\x82\xAC \xF0\x9F\x98\x80\ttab\nline"),
            "Qwen \xE2\x82\xAC \xF0\x9F\x98\x80\ttab\nline");
}

TEST(CsvField, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField(""), "");
}

TEST(CsvField, AFormulaIsDefused) {
  EXPECT_EQ(CsvField("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
  EXPECT_EQ(CsvField("+1"), "'+1");
  EXPECT_EQ(CsvField("-cmd"), "'-cmd");
  EXPECT_EQ(CsvField("@SUM(A1)"), "'@SUM(A1)");
}

TEST(TerminalEscaped, ControlBytesPrintAsText) {
  EXPECT_EQ(TerminalEscaped("x\x1b[2K\rFITS"), "x\\x1b[2K\\x0dFITS");
  EXPECT_EQ(TerminalEscaped("a\nb\tc\x7f"), "a\\x0ab\\x09c\\x7f");
  EXPECT_EQ(TerminalEscaped("\xC2\x9B"
                            "31m"),
            "\\u009b31m");  // C1 CSI in UTF-8
}

TEST(TerminalEscaped, AWholeReportKeepsItsLines) {
  EXPECT_EQ(TerminalEscaped("line 1\nline \x1b[A2\n", true), "line 1\nline \\x1b[A2\n");
}

TEST(TerminalEscaped, OrdinaryTextIsUnchanged) {
  const std::string text = "FITS: 1.5 GiB \xE2\x82\xAC r\xC3\xA9sum\xC3\xA9 C:\\path";
  EXPECT_EQ(TerminalEscaped(text), text);
}

TEST(JsonText, InvalidUtf8BecomesTheReplacementCharacter) {
  EXPECT_EQ(JsonText(nlohmann::json{{"model", "bad\xff"}}, -1), "{\"model\":\"bad\xEF\xBF\xBD\"}");
  EXPECT_EQ(JsonText(nlohmann::json("esc\x1b"), -1), "\"esc\\u001b\"");
}

}  // namespace
}  // namespace headroom
