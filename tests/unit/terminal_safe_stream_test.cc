// The terminal-safe filter every printed byte passes (tools/terminal_safe_stream.h).
#include "terminal_safe_stream.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace optstate::tools {
namespace {

TEST(TerminalSafeTest, ControlCharactersAreEscaped) {
  EXPECT_EQ(EscapeForTerminal("\x1b[2K\rfindings: none\x07"), "\\x1b[2K\\rfindings: none\\x07");
  EXPECT_EQ(EscapeForTerminal(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(EscapeForTerminal("line\n\tindented\n"), "line\n\tindented\n");
}

TEST(TerminalSafeTest, ValidUtf8PassesAndInvisibleControlsDoNot) {
  EXPECT_EQ(EscapeForTerminal("├─ 3×4 → ok"), "├─ 3×4 → ok");
  EXPECT_EQ(EscapeForTerminal("sys\u202etem"), "sys\\u202etem");           // right-to-left override
  EXPECT_EQ(EscapeForTerminal("a\u2066b\u2069c\u200f"), "a\\u2066b\\u2069c\\u200f");
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b" "31m"), "\\u009b31m");            // C1 CSI
  EXPECT_EQ(EscapeForTerminal("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");    // U+1F600
}

TEST(TerminalSafeTest, InvalidUtf8BecomesHexBytes) {
  EXPECT_EQ(EscapeForTerminal("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeForTerminal("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(EscapeForTerminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(EscapeForTerminal("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(EscapeForTerminal("\xe2\x82"), "\\xe2\\x82");          // cut short
}

TEST(TerminalSafeTest, StreamJudgesACharacterSplitAcrossWritesWhole) {
  std::ostringstream sink;
  {
    TerminalSafeBuf buf(sink.rdbuf());
    std::ostream out(&buf);
    out << "a\xe2\x80";  // the first two bytes of U+202E
    out << "\xae" << "b\n" << "tail\x1b";
    EXPECT_EQ(sink.str(), "a\\u202eb\n");  // the line is out; "tail" waits for a newline or flush
    out.flush();
  }
  EXPECT_EQ(sink.str(), "a\\u202eb\ntail\\x1b");
}

}  // namespace
}  // namespace optstate::tools
