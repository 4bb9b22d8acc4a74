#include "tessera/balance/cluster/strict_yaml.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/strings.hpp"

namespace tessera::balance {
namespace {

// Iterating the keys of a temporary map would walk freed memory; the overload is deleted.
template <typename Map>
concept HasEntriesOnTemporary = requires { std::declval<Map&&>().entries(); };
template <typename Map>
concept HasEntriesOnNamed = requires(const Map& map) { map.entries(); };
static_assert(!HasEntriesOnTemporary<cluster::YamlMap>);
static_assert(HasEntriesOnNamed<cluster::YamlMap>);

void expect_has(const std::string& message, const std::string& phrase) {
  EXPECT_NE(message.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in: " << message;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera-yaml-" + std::to_string(::getpid()) + "-" + name)).string();
}

// Runs `read` over `text` as the document "doc.yaml" and returns the Status.
Status read_text(const std::string& text, const std::function<void(const YAML::Node&)>& read = [](const YAML::Node&) {}) {
  return cluster::read_yaml(text, "doc.yaml", read);
}

// The message of reading `text` with `read`, which must fail.
std::string failure(const std::string& text, const std::function<void(const YAML::Node&)>& read) {
  Status status = read_text(text, read);
  EXPECT_FALSE(status.is_ok()) << text;
  EXPECT_EQ(status.code(), StatusCode::kInvalidConfig) << status.to_string();
  return status.message();
}

const std::vector<std::string> kKeys = {"cluster", "nodes", "threads"};

// Reads the top-level mapping with kKeys and applies `get` to it.
std::function<void(const YAML::Node&)> with_map(std::function<void(const cluster::YamlMap&)> get) {
  return [get = std::move(get)](const YAML::Node& root) {
    const cluster::YamlMap map(root, cluster::yaml_line(root, 1), kKeys, "the top level");
    get(map);
  };
}

TEST(StrictYaml, RefusesARepeatedKeyAtAnyDepth) {
  Status top = read_text("cluster: a\nnodes: []\ncluster: b\n");
  ASSERT_FALSE(top.is_ok());
  EXPECT_EQ(top.message(), "doc.yaml:3: key 'cluster' appears twice in the top level (first on line 1); keep one");

  const std::string deep =
      "outer:\n"
      "  list:\n"
      "    - {name: a}\n"
      "    - name: b\n"
      "      inner:\n"
      "        port: 1\n"
      "        host: h\n"
      "        port: 2\n";
  Status nested = read_text(deep);
  ASSERT_FALSE(nested.is_ok());
  EXPECT_EQ(nested.code(), StatusCode::kInvalidConfig);
  EXPECT_EQ(nested.message(),
            "doc.yaml:8: key 'port' appears twice in outer.list[1].inner (first on line 6); keep one");

  Status flow = read_text("a: [{x: 1, y: 2, x: 3}]\n");
  ASSERT_FALSE(flow.is_ok());
  expect_has(flow.message(), "doc.yaml:1: key 'x' appears twice in a[0]");
}

TEST(StrictYaml, TheSameKeyInDifferentMappingsIsFine) {
  EXPECT_TRUE(read_text("a: {name: x}\nb: {name: y}\nlist:\n  - {name: 1}\n  - {name: 2}\n").is_ok());
}

TEST(StrictYaml, RefusesNestingPastTheLimit) {
  const std::string deep = std::string(cluster::kMaxYamlDepth + 2, '[') + std::string(cluster::kMaxYamlDepth + 2, ']') + "\n";
  Status status = read_text(deep);
  ASSERT_FALSE(status.is_ok());
  expect_has(status.message(), "nests deeper than 64 levels");
  const std::string shallow = std::string(cluster::kMaxYamlDepth, '[') + std::string(cluster::kMaxYamlDepth, ']') + "\n";
  EXPECT_TRUE(read_text(shallow).is_ok());
}

// yaml-cpp's own guard stops at 500 levels with "bad file"; every depth past 64, in every way of
// nesting, gets the same message at the line where the nesting goes too deep.
TEST(StrictYaml, EveryDepthPastTheLimitGetsTheSameMessage) {
  for (const int depth : {65, 66, 100, 499, 500, 501, 1000, 5000}) {
    SCOPED_TRACE(depth);
    std::string block_map;
    for (int i = 0; i < depth; ++i) block_map += std::string(static_cast<std::size_t>(i), ' ') + "k:\n";
    block_map += std::string(static_cast<std::size_t>(depth), ' ') + "v\n";
    std::string block_list = "cluster: lab\nnodes:\n  ";
    for (int i = 0; i < depth; ++i) block_list += "- ";
    block_list += "x\n";
    std::string flow_map = "a: 1\nb: ";
    for (int i = 0; i < depth; ++i) flow_map += "{a: ";
    flow_map += "1" + std::string(static_cast<std::size_t>(depth), '}') + "\n";
    const std::string flow_list =
        "a: 1\nb: 2\nc: " + std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']') + "\n";
    for (const auto& [text, lines] : std::vector<std::pair<std::string, std::pair<int, int>>>{
             {block_map, {64, 66}}, {block_list, {3, 3}}, {flow_map, {2, 2}}, {flow_list, {3, 3}}}) {
      const Status status = read_text(text);
      ASSERT_FALSE(status.is_ok()) << text.substr(0, 80);
      EXPECT_EQ(status.code(), StatusCode::kInvalidConfig);
      expect_has(status.message(), "nests deeper than 64 levels");
      expect_has(status.message(), "; flatten it");
      const int line = std::stoi(status.message().substr(std::string("doc.yaml:").size()));
      EXPECT_GE(line, lines.first) << status.message().substr(0, 200);
      EXPECT_LE(line, lines.second) << status.message().substr(0, 200);
    }
  }
}

// A YAML file is text: a NUL, an escape or another control byte is refused at its line by name,
// before yaml-cpp reads it ("unknown escape character: X" said nothing useful).
TEST(StrictYaml, ControlBytesAreRefusedAtTheirLine) {
  for (const auto& [byte, shown] : std::vector<std::pair<char, std::string>>{
           {'\0', "\\x00 (NUL)"}, {'\x1b', "\\x1b (ESC)"}, {'\x07', "\\x07 (BEL)"}, {'\x7f', "\\x7f (DEL)"},
           {'\x01', "\\x01 (SOH)"}, {'\x1f', "\\x1f (US)"}}) {
    SCOPED_TRACE(shown);
    const Status refused = read_text(std::string("a: 1\nb: 2\nc: x") + byte + "y\n");
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig);
    const std::string name = shown.substr(shown.find('(') + 1, shown.size() - shown.find('(') - 2);
    expect_has(refused.message(), "doc.yaml:3: this line holds the byte " + shown +
                                      ", and a YAML file is text; remove the " + name + " byte at line 3");
    EXPECT_EQ(refused.message().find(byte), std::string::npos);
  }
  // Tabs, carriage returns and text that is not ASCII are not binary content.
  EXPECT_TRUE(read_text("a:\t1\r\nb: n\xc3\xb6de \xe2\x82\xac\r\n").is_ok());
}

// yaml-cpp's own messages quote the byte it stopped at; that byte is escaped too.
TEST(StrictYaml, SyntaxErrorsQuoteTheFileEscaped) {
  const Status syntax = read_text("a: 1\nb: \"\\\x91x\x91\"\n");
  ASSERT_FALSE(syntax.is_ok());
  expect_has(syntax.message(), "doc.yaml:2: YAML syntax error: unknown escape character: \\x91");
  EXPECT_EQ(syntax.message().find('\x91'), std::string::npos) << syntax.message();
  EXPECT_EQ(printable_message(syntax.message()), syntax.message());
}

// yaml-cpp keeps a tag and ignores it (`!!binary` is never decoded), so any tag is refused.
TEST(StrictYaml, TagsAreRefusedWhereverTheyAre) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"cluster: lab\nsecret: !!binary aGVsbG8=\n",
            "doc.yaml:2: secret has the YAML tag '!!binary'; tags are not supported (Tessera would ignore it and read the "
            "value as written): remove '!!binary' and write the value itself as plain text"},
           {"port: !!int 7070\n", "doc.yaml:1: port has the YAML tag '!!int'"},
           {"secret: !vault x\n", "doc.yaml:1: secret has the YAML tag '!vault'"},
           {"secret: ! x\n", "doc.yaml:1: secret has the YAML tag '!'"},
           {"secret: !<tag:x> y\n", "doc.yaml:1: secret has the YAML tag '!<tag:x>'"},
           {"secret: &s !!str y\n", "doc.yaml:1: secret has the YAML tag '!!str'"},
           {"nodes:\n  - {name: a, port: !!str 7070}\n", "doc.yaml:2: nodes[0].port has the YAML tag '!!str'"},
           {"sizes: [1, !!int 2]\n", "doc.yaml:1: sizes[1] has the YAML tag '!!int'"},
           {"emulate: !!map {cpu: 1}\n", "doc.yaml:1: emulate has the YAML tag '!!map'"},
           {"!!str cluster: lab\n", "doc.yaml:1: the key 'cluster' in the top level has the YAML tag '!!str'"},
           {"secret: !\x1b[2J x\n", "doc.yaml:1: secret has the YAML tag '!\\x1b[2J'"}}) {
    SCOPED_TRACE(text);
    const Status refused = read_text(text);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig);
    if (text.find('\x1b') != std::string::npos) {
      // A raw ESC is refused as binary content before any tag is looked at.
      expect_has(refused.message(), "ESC byte");
    } else {
      expect_has(refused.message(), expected);
    }
  }
  // A '!' inside a value, or quoted at its start, is text, not a tag.
  for (const std::string text : {"a: it!s\n", "a: '!x'\n", "a: \"!x\"\n", "a: [x!, 'y']\n", "a: x # !tag\n"}) {
    const Status read = read_text(text);
    EXPECT_TRUE(read.is_ok()) << text << ": " << read.to_string();
  }
}

// "016513" is 16513 to YAML 1.2 and 7499 to YAML 1.1 (octal); the typed getters refuse it.
TEST(StrictYaml, NumbersWithALeadingZeroAreRefused) {
  const std::vector<std::string> keys = {"port", "ratio", "sizes", "cpus"};
  auto fails = [&](const std::string& text, std::function<void(const cluster::YamlMap&)> get) {
    return failure(text, [&](const YAML::Node& root) {
      const cluster::YamlMap map(root, cluster::yaml_line(root, 1), keys, "node 'a'");
      get(map);
    });
  };
  const auto port = [](const cluster::YamlMap& m) { (void)m.integer("port", 1, 65535, "7070"); };
  const auto ratio = [](const cluster::YamlMap& m) { (void)m.number("ratio", cluster::NumberRange{-100, 100}, "0.5"); };
  EXPECT_EQ(fails("port: 016513\n", port),
            "doc.yaml:1: node 'a' has port: 016513: a leading zero is ambiguous (octal in YAML 1.1); write port: 16513");
  expect_has(fails("port: +0080\n", port), "node 'a' has port: +0080: a leading zero is ambiguous (octal in YAML 1.1); "
                                            "write port: +80");
  expect_has(fails("port: '08'\n", port), "write port: 8");
  expect_has(fails("ratio: 00\n", ratio), "ratio: 00: a leading zero is ambiguous (octal in YAML 1.1); write ratio: 0");
  expect_has(fails("ratio: -05.5\n", ratio), "write ratio: -5.5");
  expect_has(fails("ratio: 00.5\n", ratio), "write ratio: 0.5");
  EXPECT_EQ(fails("sizes: [1, 016]\n", [](const cluster::YamlMap& m) { (void)m.integer_list("sizes", 1, 99, "[1]"); }),
            "doc.yaml:1: node 'a' has '016' in sizes: a leading zero is ambiguous (octal in YAML 1.1); write 16");
  expect_has(fails("cpus:\n  - 0.5\n  - 01.5\n",
                   [](const cluster::YamlMap& m) { (void)m.number_list("cpus", cluster::NumberRange{0, 64}, "[1]"); }),
             "doc.yaml:3: node 'a' has '01.5' in cpus: a leading zero is ambiguous");
  // A zero on its own, or before the point or an exponent, is no octal.
  Status fine = read_text("port: 0\nratio: 0.5\nsizes: [0, 10]\ncpus: [0e3, -0.25, +0]\n", [&](const YAML::Node& root) {
    const cluster::YamlMap map(root, 1, keys, "here");
    EXPECT_EQ(map.integer("port", 0, 9, "1"), 0u);
    EXPECT_EQ(map.number("ratio", cluster::NumberRange{0, 1}, "0.1"), 0.5);
    EXPECT_EQ(map.integer_list("sizes", 0, 10, "[1]"), (std::vector<uint64_t>{0, 10}));
    EXPECT_EQ(map.number_list("cpus", cluster::NumberRange{-1, 1}, "[1]"), (std::vector<double>{0, -0.25, 0}));
  });
  EXPECT_TRUE(fine.is_ok()) << fine.to_string();
}

// Aliases let a few lines stand for millions of values; the check stops counting, it does not hang.
TEST(StrictYaml, RefusesAliasBombs) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 7; ++level) {
    const std::string previous = "*a" + std::to_string(level - 1);
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) text += (i ? ", " : "") + previous;
    text += "]\n";
  }
  Status status = read_text(text);
  ASSERT_FALSE(status.is_ok());
  expect_has(status.message(), "expands to more than");
}

TEST(StrictYaml, UnknownKeyListsTheValidOnesAndSuggestsTheClosest) {
  const std::string typo = failure("cluster: a\nnodez: []\n", with_map([](const cluster::YamlMap&) {}));
  EXPECT_EQ(typo,
            "doc.yaml:2: unknown key 'nodez' in the top level; valid keys are cluster, nodes, threads; did you mean "
            "'nodes'?");
  const std::string unrelated = failure("colour: red\n", with_map([](const cluster::YamlMap&) {}));
  EXPECT_EQ(unrelated, "doc.yaml:1: unknown key 'colour' in the top level; valid keys are cluster, nodes, threads");
  const std::string not_a_name = failure("cluster: a\n[x]: 1\n", with_map([](const cluster::YamlMap&) {}));
  expect_has(not_a_name, "doc.yaml:2: a key in the top level is a list; keys must be plain names");
}

TEST(StrictYaml, KeepsEachKeyWithItsLine) {
  Status status = read_text("# comment\ncluster: lab\n\nthreads: 4\n", with_map([](const cluster::YamlMap& map) {
                              ASSERT_TRUE(map.has("cluster"));
                              EXPECT_EQ(map.find("cluster")->line, 2);
                              EXPECT_EQ(map.find("threads")->line, 4);
                              EXPECT_EQ(map.find("nodes"), nullptr);
                              EXPECT_EQ(map.entries().size(), 2u);
                              EXPECT_EQ(map.text("cluster", "lab"), "lab");
                              EXPECT_EQ(map.text("nodes", "x"), std::nullopt);
                              EXPECT_EQ(map.integer("threads", 1, 8, "4"), 4u);
                            }));
  EXPECT_TRUE(status.is_ok()) << status.to_string();
}

TEST(StrictYaml, TypedGettersFailWithLineValueAndFix) {
  const std::vector<std::string> keys = {"name", "count", "ratio", "flag", "sizes", "cpus"};
  auto fails = [&](const std::string& text, std::function<void(const cluster::YamlMap&)> get) {
    return failure(text, [&](const YAML::Node& root) {
      const cluster::YamlMap map(root, cluster::yaml_line(root, 1), keys, "node 'pi1'");
      get(map);
    });
  };
  EXPECT_EQ(fails("name: [a]\n", [](const cluster::YamlMap& m) { (void)m.text("name", "pi1"); }),
            "doc.yaml:1: node 'pi1' has name a list; name must be non-empty text, e.g. name: pi1");
  EXPECT_EQ(fails("name: ''\n", [](const cluster::YamlMap& m) { (void)m.text("name", "pi1"); }),
            "doc.yaml:1: node 'pi1' has name ''; name must be non-empty text, e.g. name: pi1");
  expect_has(fails("x: 1\ncount: four\n", [](const cluster::YamlMap&) {}), "doc.yaml:1: unknown key 'x' in node 'pi1'");
  EXPECT_EQ(fails("name: a\ncount: four\n", [](const cluster::YamlMap& m) { (void)m.integer("count", 1, 8, "4"); }),
            "doc.yaml:2: node 'pi1' has count: four; count must be an integer 1..8, e.g. count: 4");
  EXPECT_EQ(fails("count: 9\n", [](const cluster::YamlMap& m) { (void)m.integer("count", 1, 8, "4"); }),
            "doc.yaml:1: node 'pi1' has count: 9, out of range; count must be an integer 1..8, e.g. count: 4");
  for (const char* not_integer : {"-1", "0x10", "2.0", "1e3", "''"}) {
    expect_has(fails(std::string("count: ") + not_integer + "\n",
                     [](const cluster::YamlMap& m) { (void)m.integer("count", 0, 100000, "4"); }),
               "count must be an integer 0..100000");
  }
  EXPECT_EQ(fails("ratio: 0\n", [](const cluster::YamlMap& m) { (void)m.number("ratio", cluster::NumberRange{0, 1, false, true}, "0.5"); }),
            "doc.yaml:1: node 'pi1' has ratio: 0; ratio must be a number in (0, 1], e.g. ratio: 0.5");
  for (const char* not_number : {"nan", "inf", "1.5x", "{a: 1}"}) {
    expect_has(fails(std::string("ratio: ") + not_number + "\n",
                     [](const cluster::YamlMap& m) { (void)m.number("ratio", cluster::NumberRange{0, 10}, "0.5"); }),
               "ratio must be a number in [0, 10]");
  }
  EXPECT_EQ(fails("flag: yes\n", [](const cluster::YamlMap& m) { (void)m.boolean("flag"); }),
            "doc.yaml:1: node 'pi1' has flag: yes; flag must be true or false");
  EXPECT_EQ(fails("sizes: []\n", [](const cluster::YamlMap& m) { (void)m.list("sizes", "[1, 2]"); }),
            "doc.yaml:1: node 'pi1' has sizes empty; sizes must be a non-empty list, e.g. sizes: [1, 2]");
  EXPECT_EQ(fails("sizes: 5\n", [](const cluster::YamlMap& m) { (void)m.integer_list("sizes", 1, 9, "[1, 2]"); }),
            "doc.yaml:1: node 'pi1' has sizes '5'; sizes must be a non-empty list, e.g. sizes: [1, 2]");
  EXPECT_EQ(fails("sizes:\n  - 1\n  - 10\n", [](const cluster::YamlMap& m) { (void)m.integer_list("sizes", 1, 9, "[1, 2]"); }),
            "doc.yaml:3: node 'pi1' has '10' in sizes; sizes must be integers 1..9, e.g. sizes: [1, 2]");
  EXPECT_EQ(fails("cpus: [0.5, 0]\n",
                  [](const cluster::YamlMap& m) { (void)m.number_list("cpus", cluster::NumberRange{0, 64, false, true}, "[1, 0.5]"); }),
            "doc.yaml:1: node 'pi1' has '0' in cpus; cpus must be numbers in (0, 64], e.g. cpus: [1, 0.5]");
  EXPECT_EQ(fails("name: a\n", [](const cluster::YamlMap& m) { m.fail_missing("count", "4"); }),
            "doc.yaml:1: node 'pi1' has no count; add count: 4");
}

TEST(StrictYaml, TypedGettersReadGoodValues) {
  const std::vector<std::string> keys = {"name", "empty", "count", "ratio", "flag", "sizes", "cpus"};
  Status status = read_text("name: pi1\nempty: ''\ncount: +7\nratio: 1.5e-3\nflag: false\nsizes: [1, 2]\ncpus: [0.25, 64]\n",
                            [&](const YAML::Node& root) {
                              const cluster::YamlMap map(root, 1, keys, "here");
                              EXPECT_EQ(map.text("name", "x"), "pi1");
                              EXPECT_EQ(map.text_or_empty("empty"), "");
                              EXPECT_EQ(map.integer("count", 0, 10, "1"), 7u);
                              EXPECT_EQ(map.number("ratio", cluster::NumberRange{0, 1}, "0.1"), 1.5e-3);
                              EXPECT_EQ(map.boolean("flag"), false);
                              EXPECT_EQ(map.integer_list("sizes", 1, 2, "[1]"), (std::vector<uint64_t>{1, 2}));
                              EXPECT_EQ(map.number_list("cpus", cluster::NumberRange{0, 64, false, true}, "[1]"),
                                        (std::vector<double>{0.25, 64}));
                              EXPECT_EQ(map.boolean("absent"), std::nullopt);
                            });
  EXPECT_TRUE(status.is_ok()) << status.to_string();
}

TEST(StrictYaml, SyntaxErrorsAndRemediesNameTheLine) {
  Status syntax = cluster::read_yaml("a: 1\nb: [1, 2\n", "doc.yaml", [](const YAML::Node&) {});
  ASSERT_FALSE(syntax.is_ok());
  expect_has(syntax.message(), "doc.yaml:");
  expect_has(syntax.message(), "YAML syntax error");

  Status remedied = cluster::read_yaml("a: 1\n", "doc.yaml", [](const YAML::Node&) { cluster::fail_at(1, "a is wrong; write b"); },
                              "the file is generated; delete it");
  EXPECT_EQ(remedied.message(), "doc.yaml:1: a is wrong; write b (the file is generated; delete it)");

  bool saw_null = false;
  EXPECT_TRUE(cluster::read_yaml("# only a comment\n", "doc.yaml", [&](const YAML::Node& root) { saw_null = root.IsNull(); }).is_ok());
  EXPECT_TRUE(saw_null);
}

// Load would read the first of several documents and drop the rest without a word.
TEST(StrictYaml, ASecondDocumentIsRefusedAtItsLine) {
  for (const auto& [text, line] : std::vector<std::pair<std::string, int>>{
           {"a: 1\n---\nb: 2\n", 2},
           {"---\na: 1\n--- # again\nb: 2\n", 3},
           {"a: 1\n---\n", 2},
           {"a: 1\n...\n# more\n---\nb: 2\n", 4},
           {"--- \na: 1\n...\nb: 2\n", 4}}) {
    const Status refused = cluster::read_yaml(text, "doc.yaml", [](const YAML::Node&) {});
    ASSERT_FALSE(refused.is_ok()) << text;
    EXPECT_EQ(refused.code(), StatusCode::kInvalidConfig);
    expect_has(refused.message(), "doc.yaml:" + std::to_string(line) + ": a second YAML document starts here");
  }
  // One document, with an explicit start or a `---` inside a block scalar, is fine.
  EXPECT_TRUE(cluster::read_yaml("---\na: 1\n", "doc.yaml", [](const YAML::Node&) {}).is_ok());
  EXPECT_TRUE(cluster::read_yaml("a: |\n  ---\n  x\n", "doc.yaml", [](const YAML::Node&) {}).is_ok());
}

// yaml-cpp reads an unclosed quote to the end of the file; here it is refused at its line.
TEST(StrictYaml, AnUnterminatedQuoteIsRefusedAtItsLine) {
  for (const auto& [text, line] : std::vector<std::pair<std::string, int>>{
           {"name: \"lab\nsecret: x\n", 1},
           {"a: 1\nname: 'lab\nsecret: x\n", 2},
           {"list:\n  - ok\n  - \"open\n", 3},
           {"\"key: 1\n", 1}}) {
    const Status refused = cluster::read_yaml(text, "doc.yaml", [](const YAML::Node&) {});
    ASSERT_FALSE(refused.is_ok()) << text;
    expect_has(refused.message(), "doc.yaml:" + std::to_string(line) + ": unterminated quote");
  }
  // Closed quotes of every kind, also over two lines or holding escaped quotes, are fine.
  for (const std::string text : {"a: \"x\"\n", "a: 'it''s'\n", "a: \"say \\\"hi\\\"\"\n", "a: \"two\n  lines\"\nb: 1\n",
                                 "a: it's\n", "'k': [\"v\", 'w']\n"}) {
    const Status read = cluster::read_yaml(text, "doc.yaml", [](const YAML::Node&) {});
    EXPECT_TRUE(read.is_ok()) << text << ": " << read.to_string();
  }
}

// Bytes from the file reach a message escaped: a key that is not UTF-8, and the file's name.
TEST(StrictYaml, BytesThatAreNotUtf8AreEscapedInMessages) {
  const Status refused = cluster::read_yaml("n\xe9" "de: 1\n", "doc\x1b.yaml", [](const YAML::Node& root) {
    const cluster::YamlMap map(root, 1, {"node"}, "the top level");
  });
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.message().rfind("doc\\x1b.yaml:1: unknown key 'n\\xe9de'", 0), 0u) << refused.message();
  EXPECT_EQ(refused.message().find('\x1b'), std::string::npos);
  EXPECT_EQ(refused.message().find('\xe9'), std::string::npos);
}

TEST(StrictYaml, FilesAreCappedAndNamedInErrors) {
  const std::string at_cap = temp_path("at-cap.yaml");
  {
    std::ofstream file(at_cap, std::ios::binary);
    const std::string line = "# " + std::string(1021, 'x') + "\n";  // 1 KiB per line
    for (std::size_t i = 0; i < cluster::kMaxYamlFileBytes / 1024; ++i) file << line;
  }
  ASSERT_EQ(std::filesystem::file_size(at_cap), cluster::kMaxYamlFileBytes);
  Result<std::string> read = cluster::read_yaml_file(at_cap, "study file");
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(read->size(), cluster::kMaxYamlFileBytes);

  std::ofstream(at_cap, std::ios::binary | std::ios::app) << "\n";
  Result<std::string> over = cluster::read_yaml_file(at_cap, "study file");
  ASSERT_FALSE(over.is_ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  expect_has(over.status().message(), "study file '" + at_cap + "' is larger than 1024 KiB");
  std::filesystem::remove(at_cap);

  Result<std::string> missing = cluster::read_yaml_file(temp_path("absent.yaml"), "cluster file");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  expect_has(missing.status().message(), "cannot open cluster file '" + temp_path("absent.yaml") + "'");
}

TEST(StrictYaml, NumberParsingIsStrict) {
  EXPECT_EQ(cluster::parse_unsigned("8080"), 8080u);
  EXPECT_EQ(cluster::parse_unsigned("+1"), 1u);
  EXPECT_EQ(cluster::parse_unsigned("18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "-1", "0x10", "1.0", " 1", "1 ", "18446744073709551616", "+"}) {
    EXPECT_EQ(cluster::parse_unsigned(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(cluster::parse_number("1.5"), 1.5);
  EXPECT_EQ(cluster::parse_number("+2e3"), 2000.0);
  EXPECT_EQ(cluster::parse_number("-0.25"), -0.25);
  for (const char* bad : {"", "nan", "inf", "1.5x", "0x1p3", "+"}) EXPECT_EQ(cluster::parse_number(bad), std::nullopt) << bad;
  EXPECT_EQ((cluster::NumberRange{0, 64, false, true}).to_string(), "(0, 64]");
  EXPECT_TRUE((cluster::NumberRange{0, 64, false, true}).contains(64));
  EXPECT_FALSE((cluster::NumberRange{0, 64, false, true}).contains(0));
}

}  // namespace
}  // namespace tessera::balance
