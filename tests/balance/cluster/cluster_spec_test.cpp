#include "tessera/balance/cluster/cluster_spec.hpp"

#include <sys/stat.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::balance {
namespace {

const std::string kConfigDir = std::string(TESSERA_TEST_INSTANCES) + "/config/";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void expect_has(const std::string& message, const std::string& phrase) {
  EXPECT_NE(message.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in: " << message;
}

struct BrokenFile {
  std::string file;
  int line;
  std::vector<std::string> phrases;
};

class BrokenConfig : public testing::TestWithParam<BrokenFile> {};

TEST_P(BrokenConfig, FailsWithFileLineAndFix) {
  const BrokenFile& c = GetParam();
  const std::string path = kConfigDir + c.file;
  auto spec = cluster::load_cluster_spec(path);
  ASSERT_FALSE(spec.is_ok()) << c.file << " parsed";
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidConfig) << spec.status().to_string();
  const std::string message = spec.status().message();
  expect_has(message, path + ":" + std::to_string(c.line) + ": ");
  EXPECT_EQ(message.rfind(path + ":", 0), 0u) << message;
  // "what is wrong; what to write instead"
  expect_has(message, "; ");
  for (const std::string& phrase : c.phrases) expect_has(message, phrase);
}

INSTANTIATE_TEST_SUITE_P(
    Instances, BrokenConfig,
    testing::Values(
        BrokenFile{"bad-syntax.yaml", 6, {"YAML syntax error"}},
        BrokenFile{"unknown-key.yaml", 7,
                   {"unknown key 'thread'", "node 'a'", "name, host, port, threads, kind, emulate",
                    "did you mean 'threads'?"}},
        BrokenFile{"unknown-top-key.yaml", 3,
                   {"unknown key 'node'", "cluster, secret, secret_file, wire, nodes", "did you mean 'nodes'?"}},
        BrokenFile{"duplicate-key.yaml", 7, {"'port' appears twice", "first on line 6"}},
        BrokenFile{"duplicate-name.yaml", 7, {"node name 'pi' is used twice (lines 4 and 7)", "unique name"}},
        BrokenFile{"duplicate-endpoint.yaml", 10,
                   {"'a' (line 4)", "'c' (line 10)", "both use 10.0.0.1:7070", "its own host:port"}},
        BrokenFile{"port-out-of-range.yaml", 6, {"port: 70000", "port must be an integer 1..65535"}},
        BrokenFile{"missing-host.yaml", 7, {"node 'b' has no host", "add host:"}},
        BrokenFile{"threads-zero.yaml", 7, {"threads: 0", "threads must be an integer 1..1024"}},
        BrokenFile{"both-secrets.yaml", 3, {"both secret (line 2) and secret_file (line 3)", "keep exactly one"}},
        BrokenFile{"no-secret.yaml", 1, {"no secret", "secret: TEXT or secret_file: PATH"}},
        BrokenFile{"empty-nodes.yaml", 3, {"nodes is empty", "at least one node"}},
        BrokenFile{"nodes-not-list.yaml", 3, {"nodes is a mapping", "nodes must be a list"}},
        BrokenFile{"wrong-type.yaml", 6, {"port: abc", "port must be an integer 1..65535"}},
        BrokenFile{"bad-emulate.yaml", 10, {"rate: 100mbps", "bit, kbit, mbit or gbit", "rate: 100mbit"}},
        BrokenFile{"bad-emulate-cpu.yaml", 7, {"cpu: 65", "cpu must be a number in (0, 64]"}},
        BrokenFile{"missing-cluster.yaml", 1, {"no cluster name", "cluster: NAME"}},
        BrokenFile{"bad-name.yaml", 4, {"'pi 3'", "not a valid name"}},
        BrokenFile{"empty.yaml", 1, {"empty"}},
        BrokenFile{"bad-wire.yaml", 3, {"wire is 'tls'", "wire: plain", "wire: encrypted"}},
        BrokenFile{"two-documents.yaml", 5, {"a second YAML document starts here", "remove this '---' line"}},
        BrokenFile{"unterminated-quote.yaml", 2, {"unterminated quote", "add the closing \""}},
        // The name's byte 0xff (not UTF-8) and its U+009B (CSI to some terminals) are shown
        // escaped, never raw.
        BrokenFile{"non-utf8-name.yaml", 4, {"'pi\\xff\\xc2\\x9b2J'", "not a valid name"}},
        // A YAML file is text: control bytes are refused by name at their line.
        BrokenFile{"nul-byte.yaml", 4, {"holds the byte \\x00 (NUL)", "remove the NUL byte at line 4"}},
        BrokenFile{"escape-byte.yaml", 2, {"holds the byte \\x1b (ESC)", "remove the ESC byte at line 2"}},
        // yaml-cpp's own message quotes the byte 0x91 it stopped at: escaped.
        BrokenFile{"bad-escape-non-utf8.yaml", 2, {"YAML syntax error: unknown escape character: \\x91"}},
        // 1,000 levels: yaml-cpp's guard gives up first, and the message is still the documented one.
        BrokenFile{"deep-nesting.yaml", 7, {"nests deeper than 64 levels", "flatten it"}},
        BrokenFile{"tagged-secret.yaml", 2,
                   {"secret has the YAML tag '!!binary'", "tags are not supported", "write the value itself"}},
        BrokenFile{"leading-zero-port.yaml", 6,
                   {"node 'a' has port: 016513: a leading zero is ambiguous (octal in YAML 1.1); write port: 16513"}}),
    [](const testing::TestParamInfo<BrokenFile>& param_info) {
      std::string name = param_info.param.file.substr(0, param_info.param.file.find('.'));
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

TEST(ClusterSpec, GoodInlineSecret) {
  const std::string path = kConfigDir + "good-inline-secret.yaml";
  auto spec = cluster::load_cluster_spec(path);
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  EXPECT_EQ(spec->name, "lab");
  EXPECT_EQ(spec->secret, "s3cret-with spaces");
  EXPECT_EQ(spec->secret_file, "");
  EXPECT_EQ(spec->source_path, path);
  EXPECT_EQ(spec->secret_line, 3);
  ASSERT_EQ(spec->nodes.size(), 3u);
  cluster::NodeSpec desktop{"desktop", "192.168.1.10", 7070, 8, "desktop", 5, std::nullopt};
  cluster::NodeSpec pi1{"pi1", "pi1.local", 7070, 1, "pi", 10, std::nullopt};
  cluster::NodeSpec pi2{"pi2", "fe80::1", 7071, 4, "", 14, std::nullopt};
  EXPECT_EQ(spec->nodes[0], desktop);
  EXPECT_EQ(spec->nodes[1], pi1);
  EXPECT_EQ(spec->nodes[2], pi2);
  EXPECT_EQ(spec->nodes[2].endpoint(), "fe80::1:7071");
  auto secret = spec->resolve_secret();
  ASSERT_TRUE(secret.is_ok());
  EXPECT_EQ(*secret, "s3cret-with spaces");
  EXPECT_EQ(spec->find_node("pi1"), 1);
  EXPECT_EQ(spec->find_node("desktop"), 0);
  EXPECT_EQ(spec->find_node("pi3"), -1);
}

// Git checks files out with the umask's mode (0644), and a secret others can read is refused.
void make_private(const std::string& path) { ASSERT_EQ(::chmod(path.c_str(), 0600), 0) << path; }

TEST(ClusterSpec, GoodSecretFileAndEmulation) {
  make_private(kConfigDir + "good.secret");
  const std::string path = kConfigDir + "good-secret-file.yaml";
  auto spec = cluster::load_cluster_spec(path);
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  EXPECT_EQ(spec->name, "emulated");
  EXPECT_EQ(spec->secret, "");
  EXPECT_EQ(spec->secret_file, kConfigDir + "good.secret");
  auto secret = spec->resolve_secret();
  ASSERT_TRUE(secret.is_ok()) << secret.status().to_string();
  EXPECT_EQ(*secret, "file-secret-value");

  ASSERT_EQ(spec->nodes.size(), 3u);
  EXPECT_FALSE(spec->nodes[0].emulate.has_value());
  EXPECT_EQ(spec->nodes[0].threads, 2u);
  ASSERT_TRUE(spec->nodes[1].emulate.has_value());
  cluster::EmulationSpec slow;
  slow.cpu = 0.5;
  slow.has_link = true;
  slow.link_rate = "100mbit";
  slow.link_delay = "2ms";
  slow.link_loss_percent = 0.5;
  EXPECT_EQ(*spec->nodes[1].emulate, slow);
  ASSERT_TRUE(spec->nodes[2].emulate.has_value());
  EXPECT_EQ(spec->nodes[2].emulate->cpu, 64.0);
  EXPECT_FALSE(spec->nodes[2].emulate->has_link);
}

TEST(ClusterSpec, ParsingTwiceGivesEqualSpecs) {
  auto first = cluster::load_cluster_spec(kConfigDir + "good-secret-file.yaml");
  auto second = cluster::load_cluster_spec(kConfigDir + "good-secret-file.yaml");
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  EXPECT_EQ(*first, *second);
}

TEST(ClusterSpec, MissingFileIsIoErrorNamingPath) {
  const std::string path = kConfigDir + "no-such-file.yaml";
  auto spec = cluster::load_cluster_spec(path);
  ASSERT_FALSE(spec.is_ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kIoError);
  expect_has(spec.status().message(), path);
}

TEST(ClusterSpec, SecretFileMissingOrEmpty) {
  const std::string missing_path = kConfigDir + "missing-secret-file.yaml";
  auto missing = cluster::load_cluster_spec(missing_path);
  ASSERT_TRUE(missing.is_ok()) << missing.status().to_string();
  auto secret = missing->resolve_secret();
  ASSERT_FALSE(secret.is_ok());
  EXPECT_EQ(secret.status().code(), StatusCode::kInvalidConfig);
  expect_has(secret.status().message(), missing_path + ":4: ");
  expect_has(secret.status().message(), kConfigDir + "does-not-exist.secret");

  make_private(kConfigDir + "empty.secret");
  const std::string empty_path = kConfigDir + "empty-secret-file.yaml";
  auto empty = cluster::load_cluster_spec(empty_path);
  ASSERT_TRUE(empty.is_ok()) << empty.status().to_string();
  secret = empty->resolve_secret();
  ASSERT_FALSE(secret.is_ok());
  EXPECT_EQ(secret.status().code(), StatusCode::kInvalidConfig);
  expect_has(secret.status().message(), empty_path + ":2: ");
  expect_has(secret.status().message(), "empty.secret' is empty");
}

// Builds a one-node document whose node carries `extra` (indented node fields).
std::string one_node(const std::string& extra, const std::string& port = "7070") {
  return "cluster: lab\nsecret: x\nnodes:\n  - name: a\n    host: 10.0.0.1\n    port: " + port + "\n" + extra;
}

struct TextCase {
  std::string yaml;
  int line;
  std::string phrase;
};

TEST(ClusterSpec, RejectsBadValuesFromText) {
  const std::vector<TextCase> cases = {
      {one_node("", "-1"), 6, "port must be an integer 1..65535"},
      {one_node("", "0"), 6, "port must be an integer 1..65535"},
      {one_node("", "80.5"), 6, "port must be an integer 1..65535"},
      {one_node("", "0x50"), 6, "port must be an integer 1..65535"},
      {one_node("", "[1, 2]"), 6, "port: a list"},
      {one_node("", ""), 6, "port must be an integer 1..65535"},
      {one_node("    threads: 1025\n"), 7, "threads must be an integer 1..1024"},
      {one_node("    threads: four\n"), 7, "threads must be an integer 1..1024"},
      {one_node("    kind: [a]\n"), 7, "kind must be non-empty text"},
      {one_node("    host: 10.0.0.2\n"), 7, "'host' appears twice"},
      {one_node("    emulate: 2\n"), 7, "emulate must be a mapping"},
      {one_node("    emulate: {}\n"), 7, "emulate must be a mapping"},
      {one_node("    emulate: {cpus: 2}\n"), 7, "did you mean 'cpu'?"},
      {one_node("    emulate: {cpu: 0}\n"), 7, "cpu must be a number in (0, 64]"},
      {one_node("    emulate: {cpu: nan}\n"), 7, "cpu must be a number in (0, 64]"},
      {one_node("    emulate: {cpu: 0.25, cpu_period: 20}\n"), 7, "cpu_period must be a time from 1ms to 1s"},
      {one_node("    emulate: {cpu: 0.25, cpu_period: 500us}\n"), 7, "e.g. cpu_period: 20ms"},
      {one_node("    emulate: {cpu: 0.25, cpu_period: 2s}\n"), 7, "cpu_period must be a time from 1ms to 1s"},
      {one_node("    emulate: {link: 5mbit}\n"), 7, "link must be a mapping"},
      {one_node("    emulate:\n      link: {delay: 5mbit}\n"), 8, "delay must be a number >= 0 with a unit us, ms or s"},
      {one_node("    emulate:\n      link: {rate: 0mbit}\n"), 8, "rate must be a number > 0"},
      {one_node("    emulate:\n      link: {rate: mbit}\n"), 8, "rate must be a number > 0"},
      {one_node("    emulate:\n      link: {loss: 101}\n"), 8, "loss must be a percentage 0..100"},
      {one_node("    emulate:\n      link: {loss: -1}\n"), 8, "loss must be a percentage 0..100"},
      {one_node("    emulate:\n      link: {jitter: 1ms}\n"), 8, "valid keys are rate, delay, loss"},
      {one_node("    color: red\n"), 7, "valid keys are name, host, port, threads, kind, emulate"},
      {one_node("    emulate: {cpus: 2}\n"), 7, "valid keys are cpu, cpu_period, link"},
      {"cluster: lab\nsecret: x\nnodes:\n  - {host: 10.0.0.1, port: 1}\n", 4, "has no name"},
      {"cluster: lab\nsecret: x\nnodes:\n  - {name: a, host: 10.0.0.1}\n", 4, "node 'a' has no port"},
      {"cluster: lab\nsecret: x\nnodes:\n  - {name: a, host: 'bad host!', port: 1}\n", 4, "not an IP address or host name"},
      {"cluster: lab\nsecret: x\nnodes:\n  - just-a-name\n", 4, "each node must be a mapping"},
      {"cluster: lab\nsecret: x\nnodes: pi1\n", 3, "nodes must be a list"},
      {"cluster: lab\nsecret: ''\nnodes:\n  - {name: a, host: h, port: 1}\n", 2, "secret must be non-empty text"},
      {"cluster: [lab]\nsecret: x\nnodes:\n  - {name: a, host: h, port: 1}\n", 1, "cluster must be non-empty text"},
      {"- cluster: lab\n", 1, "write a mapping with keys cluster, secret, secret_file, wire, nodes"},
      {"cluster: lab\nsecret: x\n[a]: 1\nnodes:\n  - {name: a, host: h, port: 1}\n", 3, "keys must be plain names"},
      {"cluster: lab\nsecret: x\nnodes:\n  - {name: a, host: h, port: 1}\n  - {name: b, host: H, port: 1}\n", 5,
       "both use H:1"},
      {"cluster: lab\nsecret: x\nnodes: {\n", 4, "YAML syntax error"},
      {"cluster: lab\n\tsecret: x\n", 2, "YAML syntax error"},
      {"cluster: lab\nsecret: x\nwire: [encrypted]\nnodes:\n  - {name: a, host: h, port: 1}\n", 3,
       "wire must be non-empty text"},
      {"cluster: lab\nsecret: x\nwire: Encrypted\nnodes:\n  - {name: a, host: h, port: 1}\n", 3,
       "write wire: plain"},
  };
  for (const TextCase& c : cases) {
    auto spec = cluster::parse_cluster_spec(c.yaml, "inline.yaml");
    ASSERT_FALSE(spec.is_ok()) << c.yaml;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidConfig);
    expect_has(spec.status().message(), "inline.yaml:" + std::to_string(c.line) + ": ");
    expect_has(spec.status().message(), c.phrase);
  }
}

TEST(ClusterSpec, WireIsPlainUnlessTheFileSaysEncryptedAndEveryNodeCarriesIt) {
  const std::string nodes = "nodes:\n  - {name: a, host: h, port: 1}\n  - {name: b, host: h, port: 2}\n";
  auto plain = cluster::parse_cluster_spec("cluster: lab\nsecret: x\n" + nodes, "plain.yaml");
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_EQ(plain->wire, transport::WireMode::kPlain);
  auto sealed = cluster::parse_cluster_spec("cluster: lab\nsecret: x\nwire: encrypted\n" + nodes, "sealed.yaml");
  ASSERT_TRUE(sealed.is_ok()) << sealed.status().to_string();
  EXPECT_EQ(sealed->wire, transport::WireMode::kEncrypted);
  for (const cluster::NodeSpec& node : sealed->nodes) EXPECT_EQ(node.wire, transport::WireMode::kEncrypted) << node.name;
  auto explicit_plain = cluster::parse_cluster_spec("cluster: lab\nsecret: x\nwire: plain\n" + nodes, "p.yaml");
  ASSERT_TRUE(explicit_plain.is_ok());
  EXPECT_EQ(explicit_plain->wire, transport::WireMode::kPlain);
}

TEST(ClusterSpec, CpuPeriodIs20MsUnlessGivenInUsMsOrS) {
  auto plain = cluster::parse_cluster_spec(one_node("    emulate: {cpu: 0.25}\n"), "p.yaml");
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_EQ(plain->nodes[0].emulate->cpu_period_us, 20000u);
  for (const auto& [text, micros] : std::vector<std::pair<std::string, uint32_t>>{
           {"20ms", 20000}, {"5ms", 5000}, {"1ms", 1000}, {"0.01s", 10000}, {"2500us", 2500}, {"1s", 1000000}}) {
    auto spec = cluster::parse_cluster_spec(one_node("    emulate: {cpu: 0.25, cpu_period: " + text + "}\n"), "p.yaml");
    ASSERT_TRUE(spec.is_ok()) << text << ": " << spec.status().to_string();
    EXPECT_EQ(spec->nodes[0].emulate->cpu_period_us, micros) << text;
  }
}

TEST(ClusterSpec, AcceptsBoundaryValues) {
  auto spec = cluster::parse_cluster_spec(one_node("    threads: 1024\n    emulate:\n      link: {rate: 1.5gbit, delay: 0.5s, loss: 100}\n",
                                          "65535"),
                                 "inline.yaml");
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  EXPECT_EQ(spec->nodes[0].port, 65535);
  EXPECT_EQ(spec->nodes[0].threads, 1024u);
  ASSERT_TRUE(spec->nodes[0].emulate.has_value());
  EXPECT_EQ(spec->nodes[0].emulate->cpu, 0.0);
  EXPECT_EQ(spec->nodes[0].emulate->link_rate, "1.5gbit");
  EXPECT_EQ(spec->nodes[0].emulate->link_delay, "0.5s");
  EXPECT_EQ(spec->nodes[0].emulate->link_loss_percent, 100.0);
  EXPECT_EQ(spec->nodes[0].line, 4);
}

TEST(ClusterSpec, NodeCountLimit) {
  auto with_nodes = [](int count) {
    std::string yaml = "cluster: big\nsecret: x\nnodes:\n";
    for (int i = 0; i < count; ++i) {
      yaml += "  - {name: n" + std::to_string(i) + ", host: 10.0.0.1, port: " + std::to_string(1000 + i) + "}\n";
    }
    return yaml;
  };
  auto ok = cluster::parse_cluster_spec(with_nodes(256), "big.yaml");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->nodes.size(), 256u);
  auto too_many = cluster::parse_cluster_spec(with_nodes(257), "big.yaml");
  ASSERT_FALSE(too_many.is_ok());
  expect_has(too_many.status().message(), "big.yaml:3: nodes lists 257 entries; at most 256");
}

TEST(ClusterSpec, RelativeSecretFileResolvesAgainstYamlFolder) {
  auto spec = cluster::parse_cluster_spec("cluster: c\nsecret_file: keys/../lab.secret\nnodes:\n  - {name: a, host: h, port: 1}\n",
                                 "/etc/tessera/lab.yaml");
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  EXPECT_EQ(spec->secret_file, "/etc/tessera/lab.secret");
  auto absolute = cluster::parse_cluster_spec("cluster: c\nsecret_file: /run/s\nnodes:\n  - {name: a, host: h, port: 1}\n",
                                     "/etc/tessera/lab.yaml");
  ASSERT_TRUE(absolute.is_ok());
  EXPECT_EQ(absolute->secret_file, "/run/s");
}

// Whatever the bytes, parsing returns a value or kInvalidConfig; no yaml-cpp exception escapes.
// A desktop on the coordinator's host and two emulated Pis, with `switch_yaml` at the top.
std::string switched(const std::string& switch_yaml) {
  return "cluster: lab\nsecret: s\n" + switch_yaml +
         "nodes:\n"
         "  - {name: desktop, host: 127.0.0.1, port: 7001}\n"
         "  - {name: pi1, host: 127.0.0.1, port: 7002, emulate: {link: {rate: 100mbit}}}\n"
         "  - {name: pi2, host: 10.0.0.12, port: 7003}\n";
}

TEST(ClusterSpec, ASwitchHoldsEveryNodeOffTheCoordinatorsHostUnlessItListsThem) {
  EXPECT_EQ(*cluster::rate_bytes_per_second("1gbit"), 1.25e8);
  EXPECT_EQ(*cluster::rate_bytes_per_second("800kbit"), 1e5);
  EXPECT_FALSE(cluster::rate_bytes_per_second("1gbps"));
  EXPECT_FALSE(cluster::rate_bytes_per_second("0mbit"));
  EXPECT_FALSE(cluster::rate_bytes_per_second("+1gbit")) << "as tc writes them: a plain number";
  EXPECT_FALSE(cluster::rate_bytes_per_second("infmbit"));
  EXPECT_FALSE(cluster::rate_bytes_per_second("mbit"));

  Result<cluster::ClusterSpec> plain = cluster::parse_cluster_spec(switched(""), "lab.yaml");
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_FALSE(plain->network_switch);
  EXPECT_FALSE(plain->behind_switch(1));

  Result<cluster::ClusterSpec> spec = cluster::parse_cluster_spec(switched("switch: {uplink: 1gbit}\n"), "lab.yaml");
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  ASSERT_TRUE(spec->network_switch);
  EXPECT_EQ(spec->network_switch->uplink_rate, "1gbit");
  EXPECT_DOUBLE_EQ(spec->network_switch->uplink_bytes_per_s, 1.25e8);
  EXPECT_EQ(spec->network_switch->nodes, (std::vector<std::string>{"pi1", "pi2"}))
      << "the desktop is on loopback without a link of its own";
  EXPECT_FALSE(spec->behind_switch(0));
  EXPECT_TRUE(spec->behind_switch(2));

  Result<cluster::ClusterSpec> listed = cluster::parse_cluster_spec(switched("switch: {uplink: 1gbit, nodes: [pi2]}\n"), "lab.yaml");
  ASSERT_TRUE(listed.is_ok()) << listed.status().to_string();
  EXPECT_EQ(listed->network_switch->nodes, std::vector<std::string>{"pi2"});
}

TEST(ClusterSpec, ABadSwitchIsRefusedWithItsLineAndTheFix) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"switch: 1gbit\n", "switch must be a mapping with uplink"},
      {"switch: {nodes: [pi1]}\n", "switch has no uplink"},
      {"switch: {uplink: fast}\n", "uplink must be a number > 0 with a unit"},
      {"switch: {uplink: 1gbit, node: [pi1]}\n", "did you mean 'nodes'?"},
      {"switch: {uplink: 1gbit, nodes: [pi9]}\n", "'pi9', which is not a node"},
      {"switch: {uplink: 1gbit, nodes: [desktop]}\n", "runs on the coordinator's host"},
      {"switch: {uplink: 1gbit, nodes: []}\n", "nodes must be a list of node names"},
  };
  for (const auto& [yaml, phrase] : cases) {
    Result<cluster::ClusterSpec> spec = cluster::parse_cluster_spec(switched(yaml), "lab.yaml");
    ASSERT_FALSE(spec.is_ok()) << yaml;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidConfig);
    expect_has(spec.status().message(), "lab.yaml:3: ");
    expect_has(spec.status().message(), phrase);
  }
}

TEST(ClusterSpec, NeverThrowsOnMangledInput) {
  const std::string good = read_text(kConfigDir + "good-secret-file.yaml");
  ASSERT_FALSE(good.empty());
  for (std::size_t cut = 0; cut <= good.size(); ++cut) {
    Result<cluster::ClusterSpec> spec = invalid_config("unset");
    EXPECT_NO_THROW(spec = cluster::parse_cluster_spec(good.substr(0, cut), "cut.yaml")) << "cut at " << cut;
    if (!spec.is_ok()) {
      EXPECT_EQ(spec.status().code(), StatusCode::kInvalidConfig);
    }
  }
  std::mt19937_64 rng(7);
  const std::string alphabet = "-:[]{}&*!|>'\"%@`#,? \n\tab01";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text = good;
    for (int edit = 0; edit < 4; ++edit) text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
    Result<cluster::ClusterSpec> spec = invalid_config("unset");
    EXPECT_NO_THROW(spec = cluster::parse_cluster_spec(text, "fuzz.yaml")) << text;
    if (!spec.is_ok()) {
      EXPECT_EQ(spec.status().code(), StatusCode::kInvalidConfig);
      expect_has(spec.status().message(), "fuzz.yaml:");
    }
  }
}

}  // namespace
}  // namespace tessera::balance
