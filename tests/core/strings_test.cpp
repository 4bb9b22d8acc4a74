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

}  // namespace
}  // namespace tessera
