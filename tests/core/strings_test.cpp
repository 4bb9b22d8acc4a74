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
}

}  // namespace
}  // namespace tessera
