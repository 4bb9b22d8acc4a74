#include "tessera/partition/placement_cache.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/graphdata/generators.hpp"

namespace tessera::partition {
namespace {

namespace fs = std::filesystem;

class PlacementCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera-placement-cache-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    Result<graphdata::Graph> mesh = graphdata::generate_graph("mesh2d:30x20", 1);
    ASSERT_TRUE(mesh.is_ok());
    graph_ = std::move(*mesh);
    options_.method = PartitionMethod::kChunks;
    options_.target_weights = {4, 1, 1, 1};
  }
  void TearDown() override { fs::remove_all(dir_); }

  PlacementKey key_for(const graphdata::Graph& graph, const PartitionOptions& options) {
    Result<PlacementKey> key = placement_key(graph, options);
    EXPECT_TRUE(key.is_ok()) << key.status().to_string();
    return key.is_ok() ? *key : PlacementKey{};
  }
  Partition stored() {
    Result<Partition> partition = partition_graph(graph_, options_);
    EXPECT_TRUE(partition.is_ok());
    const PlacementKey key = key_for(graph_, options_);
    EXPECT_TRUE(store_placement(dir_, key, *partition).is_ok());
    return *partition;
  }
  // Loads and expects a miss whose reason contains `expected`.
  void expect_miss(const PlacementKey& key, const graphdata::Graph& graph, const std::string& expected) {
    std::string reason;
    Result<std::optional<Partition>> loaded = load_placement(dir_, key, graph, &reason);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    EXPECT_FALSE(loaded->has_value());
    EXPECT_NE(reason.find(expected), std::string::npos) << reason;
  }
  fs::path file_of(const PlacementKey& key) { return dir_ / placement_file_name(key); }
  std::vector<char> read_all(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write_all(const fs::path& path, const std::vector<char>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  fs::path dir_;
  graphdata::Graph graph_;
  PartitionOptions options_;
};

TEST_F(PlacementCacheTest, HashSeesContentNotJustSizes) {
  Result<graphdata::Graph> a = graphdata::build_graph({.vertex_count = 4, .edges = {{0, 1}, {2, 3}}});
  Result<graphdata::Graph> b = graphdata::build_graph({.vertex_count = 4, .edges = {{0, 2}, {1, 3}}});
  Result<graphdata::Graph> weighted = graphdata::build_graph({.vertex_count = 4, .edges = {{0, 1}, {2, 3}}, .vertex_weights = {1, 1, 1, 2}});
  ASSERT_TRUE(a.is_ok() && b.is_ok() && weighted.is_ok());
  EXPECT_EQ(graph_content_hash(*a), graph_content_hash(*a));
  EXPECT_NE(graph_content_hash(*a), graph_content_hash(*b));
  EXPECT_NE(graph_content_hash(*a), graph_content_hash(*weighted));
}

TEST_F(PlacementCacheTest, HitReturnsThePartitionWithItsQuality) {
  const Partition original = stored();
  std::string reason = "stale";
  Result<std::optional<Partition>> loaded = load_placement(dir_, key_for(graph_, options_), graph_, &reason);
  ASSERT_TRUE(loaded.is_ok());
  ASSERT_TRUE(loaded->has_value()) << reason;
  EXPECT_TRUE(reason.empty());
  EXPECT_EQ((*loaded)->part, original.part);
  EXPECT_EQ((*loaded)->quality.edge_cut, original.quality.edge_cut);
  EXPECT_EQ((*loaded)->quality.comm_volume, original.quality.comm_volume);
  EXPECT_NEAR((*loaded)->quality.imbalance, original.quality.imbalance, 1e-12);
  // Equivalent weights (same shares) are the same key and the same file.
  PartitionOptions scaled = options_;
  scaled.target_weights = {0.4, 0.1, 0.1, 0.1};
  Result<std::optional<Partition>> again = load_placement(dir_, key_for(graph_, scaled), graph_, &reason);
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->has_value()) << reason;
}

TEST_F(PlacementCacheTest, NoFileIsAMiss) {
  expect_miss(key_for(graph_, options_), graph_, "no cached placement");
  EXPECT_FALSE(fs::exists(dir_));  // a load never creates the directory
}

TEST_F(PlacementCacheTest, OtherWeightsPartsMethodOrSeedUseOtherFiles) {
  stored();
  const PlacementKey key = key_for(graph_, options_);
  std::vector<PartitionOptions> others(4, options_);
  others[0].target_weights = {3, 1, 1, 1};
  others[1].target_weights = {4, 1, 1, 1, 1};
  others[2].method = PartitionMethod::kFennel;
  others[3].seed = 7;
  for (const PartitionOptions& other : others) {
    const PlacementKey other_key = key_for(graph_, other);
    EXPECT_NE(placement_file_name(other_key), placement_file_name(key));
    expect_miss(other_key, graph_, "no cached placement");
  }
}

// A file put under another key's name (a stale copy, a name collision) is checked field by field.
TEST_F(PlacementCacheTest, HeaderNotMatchingTheKeyIsIgnoredWithAReason) {
  stored();
  const fs::path original = file_of(key_for(graph_, options_));
  struct Case {
    PartitionOptions options;
    graphdata::Graph graph;
    std::string reason;
  };
  // Same sizes, different edges: a 30x20 mesh against a 20x30 mesh (600 vertices, 1150 edges each).
  Result<graphdata::Graph> transposed = graphdata::generate_graph("mesh2d:20x30", 1);
  ASSERT_TRUE(transposed.is_ok());
  ASSERT_EQ(transposed->vertex_count(), graph_.vertex_count());
  ASSERT_EQ(transposed->edge_count(), graph_.edge_count());
  std::vector<Case> cases;
  cases.push_back({options_, *transposed, "graph hash"});
  PartitionOptions weights = options_;
  weights.target_weights = {1, 1, 1, 1};
  cases.push_back({weights, graph_, "target weight of part 0"});
  PartitionOptions parts = options_;
  parts.target_weights = {4, 1, 1};
  cases.push_back({parts, graph_, "stored for 4 parts, not 3"});
  PartitionOptions seed = options_;
  seed.seed = 99;
  cases.push_back({seed, graph_, "seed 1 differs from 99"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    const PlacementKey other = key_for(c.graph, c.options);
    fs::copy_file(original, file_of(other), fs::copy_options::overwrite_existing);
    expect_miss(other, c.graph, c.reason);
  }
}

TEST_F(PlacementCacheTest, CorruptOrTruncatedFilesAreIgnored) {
  stored();
  const PlacementKey key = key_for(graph_, options_);
  const fs::path path = file_of(key);
  const std::vector<char> good = read_all(path);
  ASSERT_GT(good.size(), 200u);

  std::vector<char> flipped = good;
  flipped[good.size() - 100] ^= 0x01;  // a part id
  write_all(path, flipped);
  expect_miss(key, graph_, "checksum mismatch");

  write_all(path, std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  expect_miss(key, graph_, "truncated");
  write_all(path, std::vector<char>(good.begin(), good.begin() + 10));
  expect_miss(key, graph_, "truncated");
  write_all(path, {});
  expect_miss(key, graph_, "truncated");

  std::vector<char> longer = good;
  longer.push_back('x');
  write_all(path, longer);
  expect_miss(key, graph_, "trailing bytes");

  std::vector<char> garbage(good.size(), 'g');
  write_all(path, garbage);
  expect_miss(key, graph_, "bad magic");

  std::vector<char> version = good;
  version[8] = 9;
  write_all(path, version);
  expect_miss(key, graph_, "format version 9");

  // Nothing above broke the cache: storing again gives a hit.
  stored();
  Result<std::optional<Partition>> loaded = load_placement(dir_, key, graph_);
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_TRUE(loaded->has_value());
}

// A header claiming 2^40 vertices must be refused from the header alone, before any allocation
// sized by it (the test would run out of memory or time otherwise).
TEST_F(PlacementCacheTest, HugeClaimedSizesAreRefusedBeforeAllocating) {
  stored();
  const PlacementKey key = key_for(graph_, options_);
  const fs::path path = file_of(key);
  const std::vector<char> good = read_all(path);
  std::vector<char> huge = good;
  const int64_t vertices = int64_t{1} << 40;
  std::memcpy(huge.data() + 24, &vertices, sizeof(vertices));  // after magic, version, parts, hash
  write_all(path, huge);
  expect_miss(key, graph_, "stored for 1099511627776 vertices");

  std::vector<char> parts = good;
  const uint32_t many = 1u << 30;
  std::memcpy(parts.data() + 12, &many, sizeof(many));
  write_all(path, parts);
  expect_miss(key, graph_, "parts");

  std::vector<char> note = good;
  const uint32_t note_bytes = 0xFFFFFFFFu;
  std::memcpy(note.data() + 64, &note_bytes, sizeof(note_bytes));
  write_all(path, note);
  expect_miss(key, graph_, "note of");
}

TEST_F(PlacementCacheTest, PartIdsOutOfRangeOrInZeroPartsAreIgnored) {
  options_.target_weights = {1, 0, 1};
  const PlacementKey key = key_for(graph_, options_);
  Partition bad;
  bad.part.assign(static_cast<std::size_t>(graph_.vertex_count()), 0);
  bad.part[5] = 1;  // in the zero-target part: store accepts it (ids in range), load must not
  ASSERT_TRUE(store_placement(dir_, key, bad).is_ok());
  expect_miss(key, graph_, "part 1 has target 0");
  bad.part[5] = 3;
  EXPECT_EQ(store_placement(dir_, key, bad).code(), StatusCode::kInvalidArgument);
  bad.part.pop_back();
  EXPECT_EQ(store_placement(dir_, key, bad).code(), StatusCode::kInvalidArgument);
}

TEST_F(PlacementCacheTest, KeyNotDescribingTheGraphIsAnError) {
  const PlacementKey key = key_for(graph_, options_);
  Result<graphdata::Graph> other = graphdata::generate_graph("mesh2d:5x5", 1);
  ASSERT_TRUE(other.is_ok());
  EXPECT_EQ(load_placement(dir_, key, *other).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(PlacementCacheTest, OverwriteIsAtomicAndLeavesNoTemporaryFiles) {
  const PlacementKey key = key_for(graph_, options_);
  Partition first = stored();
  Partition second = first;
  for (int32_t& p : second.part) p = 0;
  second.note = "second";
  ASSERT_TRUE(store_placement(dir_, key, second).is_ok());
  Result<std::optional<Partition>> loaded = load_placement(dir_, key, graph_);
  ASSERT_TRUE(loaded.is_ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->part, second.part);
  EXPECT_EQ((*loaded)->note, "second");
  // Only the one file: the temporary was renamed, not left beside it.
  int files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), placement_file_name(key));
  }
  EXPECT_EQ(files, 1);
  // The old file's inode is replaced, not rewritten in place: a reader that opened it before the
  // overwrite still reads the complete old contents.
  const std::vector<char> second_bytes = read_all(file_of(key));
  std::ifstream held(file_of(key), std::ios::binary);
  ASSERT_TRUE(store_placement(dir_, key, first).is_ok());
  const std::vector<char> old_bytes{std::istreambuf_iterator<char>(held), std::istreambuf_iterator<char>()};
  EXPECT_EQ(old_bytes, second_bytes);
  Result<std::optional<Partition>> newest = load_placement(dir_, key, graph_);
  ASSERT_TRUE(newest.is_ok() && newest->has_value());
  EXPECT_EQ((*newest)->part, first.part);
}

TEST_F(PlacementCacheTest, StoreIntoAFileInsteadOfADirectoryFails) {
  fs::create_directories(dir_);
  write_all(dir_ / "file", {'x'});
  Result<Partition> partition = partition_graph(graph_, options_);
  ASSERT_TRUE(partition.is_ok());
  const Status status = store_placement(dir_ / "file", key_for(graph_, options_), *partition);
  EXPECT_EQ(status.code(), StatusCode::kIoError) << status.to_string();
}

}  // namespace
}  // namespace tessera::partition
