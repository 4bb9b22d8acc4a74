#include "tessera/balance/cluster/strict_yaml.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

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
