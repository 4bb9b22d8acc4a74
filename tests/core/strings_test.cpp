#include "tessera/core/strings.hpp"

#include <array>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(Join, PutsTheSeparatorOnlyBetweenItems) {
  EXPECT_EQ(join(std::vector<std::string>{}, ", "), "");
  EXPECT_EQ(join(std::vector<std::string>{"a"}, ", "), "a");
  EXPECT_EQ(join(std::vector<std::string>{"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(join(std::vector<std::string>{"", ""}, "|"), "|");
  const std::array<const char*, 3> words = {"ip", "link", "add"};
  EXPECT_EQ(join(words, " "), "ip link add");
}

TEST(Join, FormatsItemsThatAreNotText) {
  const std::vector<int> sizes = {2048, 4096, 8192};
  EXPECT_EQ(join(sizes, "; ", [](int size) { return std::to_string(size); }), "2048; 4096; 8192");
  struct Node {
    std::string name;
  };
  const std::vector<Node> nodes = {{"pi1"}, {"pi2"}};
  EXPECT_EQ(join(nodes, ", ", &Node::name), "pi1, pi2");
}

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutionsIgnoringCase) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("thread", "threads"), 1u);
  EXPECT_EQ(edit_distance("Threads", "threads"), 0u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("nodez", "nodes"), 1u);
}

TEST(ClosestMatch, SuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> keys = {"cluster", "secret", "secret_file", "nodes"};
  EXPECT_EQ(closest_match("node", keys), "nodes");
  EXPECT_EQ(closest_match("nodez", keys), "nodes");
  EXPECT_EQ(closest_match("secret-file", keys), "secret_file");
  EXPECT_EQ(closest_match("colour", keys), "");
  EXPECT_EQ(closest_match("x", keys), "");
  EXPECT_EQ(closest_match("anything", std::vector<std::string>{}), "");
}

TEST(Printable, KeepsUtf8AndEscapesEverythingElse) {
  EXPECT_EQ(printable("pi1"), "pi1");
  // (A literal's \x escape takes every hex digit after it, hence the split literals.)
  EXPECT_EQ(printable("n\xc3\xb6" "de \xe2\x82\xac \xf0\x9f\x8d\x95"), "n\xc3\xb6" "de \xe2\x82\xac \xf0\x9f\x8d\x95");
  EXPECT_EQ(printable("a\xff" "b"), "a\\xffb");
  EXPECT_EQ(printable("\xc3"), "\\xc3") << "a sequence cut short";
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf") << "an overlong '/'";
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a surrogate";
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80") << "above U+10FFFF";
  EXPECT_EQ(printable("red\x1b[31m\n\t\x7f"), "red\\x1b[31m\\x0a\\x09\\x7f");
  EXPECT_EQ(printable(std::string_view("a\0b", 3)), "a\\x00b");
  // U+009B is CSI to a terminal that honours 8-bit controls; U+00A0 (no-break space) is text.
  EXPECT_EQ(printable("\xc2\x9b" "2J \xc2\x85 \xc2\xa0"), "\\xc2\\x9b2J \\xc2\\x85 \xc2\xa0");
}

// Every kind of byte a hostile file could hold, alone and among text.
const std::string kHostile = std::string("ok\x1b]0;PWNED\x07 \x1b[2J") + std::string(1, '\0') + "\x91\xff\x7f\t\r" +
                             "\xc2\x9b" "6n \\x1b already escaped \xe2\x82\xac\nsecond line";

// True when `text` could go to a terminal as it is: valid UTF-8 (the test's own check, not
// printable's), no C0 control but newline, no DEL, no C1 control.
bool terminal_safe(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if ((byte < 0x20 && byte != '\n') || byte == 0x7f) return false;
      ++i;
      continue;
    }
    const std::size_t length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc2 ? 2 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    if (byte == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return false;
    i += length;
  }
  return true;
}

TEST(Printable, IsIdempotentAndLeavesBackslashesAlone) {
  const std::string once = printable(kHostile);
  EXPECT_EQ(printable(once), once);
  EXPECT_TRUE(terminal_safe(once)) << once;
  EXPECT_EQ(once.find('\n'), std::string::npos);
  EXPECT_NE(once.find("\\x1b already escaped"), std::string::npos) << "a backslash in the text is kept as it is";
}

TEST(PrintableMessage, KeepsNewlinesAndEscapesTheRest) {
  EXPECT_EQ(printable_message("line one\nline two\n"), "line one\nline two\n");
  EXPECT_EQ(printable_message("a\tb\r\n\x1b[31m"), "a\\x09b\\x0d\n\\x1b[31m");
  const std::string once = printable_message(kHostile);
  EXPECT_TRUE(terminal_safe(once)) << once;
  EXPECT_NE(once.find("\nsecond line"), std::string::npos);
  // Idempotent: what printable() already escaped, and printable_message's own output, pass unchanged.
  EXPECT_EQ(printable_message(once), once);
  EXPECT_EQ(printable_message(printable(kHostile)), printable(kHostile));
  EXPECT_EQ(printable_message("n\xc3\xb6" "de \\xff \xf0\x9f\x8d\x95"), "n\xc3\xb6" "de \\xff \xf0\x9f\x8d\x95");
}

}  // namespace
}  // namespace tessera
