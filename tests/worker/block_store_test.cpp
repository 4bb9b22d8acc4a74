#include "tessera/worker/block_store.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/transport/block_key.hpp"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using transport::BlockKey;

// A folder of its own, removed afterwards.
class BlockStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-blocks-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static Block block_of(uint32_t rows, uint32_t cols, double first) {
    Block block{rows, cols, std::vector<double>(uint64_t{rows} * cols)};
    for (std::size_t i = 0; i < block.values.size(); ++i) block.values[i] = first + static_cast<double>(i);
    return block;
  }
  static BlockKey key_of(const Block& block) { return *transport::block_key(block.rows, block.cols, block.values); }

  std::unique_ptr<BlockStore> open(uint64_t memory, uint64_t disk, const std::string& secret = "s3cret") {
    BlockStoreOptions options{memory, dir_, disk, secret};
    Result<std::unique_ptr<BlockStore>> store = BlockStore::open(options);
    EXPECT_TRUE(store.is_ok()) << store.status().to_string();
    return store.is_ok() ? std::move(*store) : nullptr;
  }
  fs::path only_file(const BlockStore& store) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(store.folder())) files.push_back(entry.path());
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? fs::path() : files.front();
  }

  fs::path dir_;
};

TEST_F(BlockStoreTest, AMissThenAHitInMemoryAndFromDiskInTheNextSession) {
  const Block block = block_of(3, 5, 1.0);
  const BlockKey key = key_of(block);
  {
    auto store = open(1 << 20, 1 << 20);
    ASSERT_NE(store, nullptr);
    EXPECT_FALSE(store->holds(key));
    EXPECT_EQ(store->get(key), nullptr);
    Result<std::string> put = store->put(key, block);
    ASSERT_TRUE(put.is_ok()) << put.status().to_string();
    EXPECT_EQ(*put, "") << "nothing to report";
    EXPECT_TRUE(store->holds(key));
    std::shared_ptr<const Block> hit = store->get(key);
    ASSERT_NE(hit, nullptr);
    EXPECT_EQ(hit->values, block.values);
    EXPECT_EQ(store->stats().memory_hits, 1u);
    EXPECT_EQ(store->stats().misses, 1u);
    // The folder and its files are the worker's alone.
    struct stat folder {};
    ASSERT_EQ(::stat(store->folder().c_str(), &folder), 0);
    EXPECT_EQ(folder.st_mode & 0077, 0u);
  }
  auto next = open(1 << 20, 1 << 20);
  ASSERT_NE(next, nullptr);
  EXPECT_TRUE(next->holds(key)) << "indexed from disk";
  std::shared_ptr<const Block> from_disk = next->get(key);
  ASSERT_NE(from_disk, nullptr);
  EXPECT_EQ(from_disk->rows, 3u);
  EXPECT_EQ(from_disk->cols, 5u);
  EXPECT_EQ(from_disk->values, block.values);
  EXPECT_EQ(next->stats().disk_hits, 1u);
  EXPECT_NE(next->get(key), nullptr);
  EXPECT_EQ(next->stats().memory_hits, 1u) << "held in memory after the disk read";
}

// Every way a file can be wrong is a miss and a deleted file, never a block.
TEST_F(BlockStoreTest, ABadPartialOrForeignFileIsDroppedNeverUsed) {
  const Block block = block_of(4, 4, 7.0);
  const BlockKey key = key_of(block);
  const auto damage = [&](const std::function<void(const fs::path&)>& how) {
    {
      auto store = open(1 << 20, 1 << 20);
      ASSERT_TRUE(store->put(key, block).is_ok());
      how(only_file(*store));
    }
    auto reopened = open(1 << 20, 1 << 20);
    EXPECT_EQ(reopened->get(key), nullptr);
    EXPECT_EQ(reopened->stats().dropped, 1u);
    EXPECT_FALSE(reopened->holds(key));
    EXPECT_TRUE(fs::is_empty(reopened->folder())) << "the bad file was deleted";
  };
  {
    SCOPED_TRACE("one value flipped");
    damage([](const fs::path& file) {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-3, std::ios::end);
      f.put('\x55');
    });
  }
  {
    SCOPED_TRACE("cut short");
    damage([](const fs::path& file) { fs::resize_file(file, fs::file_size(file) - 8); });
  }
  {
    SCOPED_TRACE("a header that lies about the shape");
    damage([](const fs::path& file) {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(8);
      const uint32_t rows = 1u << 30;
      f.write(reinterpret_cast<const char*>(&rows), 4);
    });
  }
  {
    SCOPED_TRACE("another block's file under this name");
    damage([&](const fs::path& file) {
      auto other_store = open(1 << 20, 1 << 20);
      const Block other = block_of(4, 4, 100.0);
      const BlockKey other_key = key_of(other);
      ASSERT_TRUE(other_store->put(other_key, other).is_ok());
      const fs::path other_file = other_store->folder() / (transport::to_hex(other_key) + ".blk");
      fs::copy_file(other_file, file, fs::copy_options::overwrite_existing);
      fs::remove(other_file);
    });
  }
}

TEST_F(BlockStoreTest, AnotherSecretNeitherFindsNorUsesTheBlocks) {
  const Block block = block_of(2, 2, 1.0);
  const BlockKey key = key_of(block);
  fs::path ours;
  {
    auto store = open(1 << 20, 1 << 20, "ours");
    ASSERT_TRUE(store->put(key, block).is_ok());
    ours = only_file(*store);
  }
  auto theirs = open(1 << 20, 1 << 20, "theirs");
  EXPECT_FALSE(theirs->holds(key)) << "another folder";
  // Planted where the other secret looks: the MAC does not match, so it is dropped.
  fs::copy_file(ours, theirs->folder() / ours.filename());
  auto planted = open(1 << 20, 1 << 20, "theirs");
  EXPECT_TRUE(planted->holds(key)) << "a file of the right name is listed until it is read";
  EXPECT_EQ(planted->get(key), nullptr);
  EXPECT_EQ(planted->stats().dropped, 1u);
}

TEST_F(BlockStoreTest, BothBoundsEvictTheLeastRecentlyUsed) {
  const Block a = block_of(16, 16, 0.0), b = block_of(16, 16, 1000.0), c = block_of(16, 16, 2000.0);
  const BlockKey ka = key_of(a), kb = key_of(b), kc = key_of(c);
  // Room for two blocks in memory and two files on disk.
  const uint64_t block_bytes = a.bytes();
  auto store = open(2 * block_bytes, 2 * (block_bytes + 200));
  ASSERT_TRUE(store->put(ka, a).is_ok());
  ASSERT_TRUE(store->put(kb, b).is_ok());
  ASSERT_NE(store->get(ka), nullptr);  // a is now the most recent: b goes first
  ASSERT_TRUE(store->put(kc, c).is_ok());
  EXPECT_LE(store->stats().memory_bytes, 2 * block_bytes);
  EXPECT_LE(store->stats().disk_bytes, 2 * (block_bytes + 200));
  EXPECT_TRUE(store->holds(ka));
  EXPECT_TRUE(store->holds(kc));
  EXPECT_FALSE(store->holds(kb)) << "least recently used, in memory and on disk";
  EXPECT_GE(store->stats().evicted, 2u);
  // A block alone over the memory bound is refused, naming the bound.
  const Block huge = block_of(64, 64, 0.0);
  Result<std::string> refused = store->put(key_of(huge), huge);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("memory bound"), std::string::npos) << refused.status().message();
}

// A store that cannot write (here: its folder made read-only, as a full disk would fail the
// write) keeps the block in memory and says why it is not on disk.
TEST_F(BlockStoreTest, AFailedWriteKeepsTheBlockInMemoryAndSaysSo) {
  if (::geteuid() == 0) {
    // root writes into a read-only folder anyway: fill the bound instead, the other way to fail.
    auto store = open(1 << 20, 100);
    const Block block = block_of(8, 8, 1.0);
    Result<std::string> put = store->put(key_of(block), block);
    ASSERT_TRUE(put.is_ok()) << put.status().to_string();
    EXPECT_NE(put->find("not kept on disk"), std::string::npos) << *put;
    EXPECT_NE(store->get(key_of(block)), nullptr);
    EXPECT_EQ(store->stats().disk_bytes, 0u);
    return;
  }
  auto store = open(1 << 20, 1 << 20);
  fs::permissions(store->folder(), fs::perms::owner_read | fs::perms::owner_exec);
  const Block block = block_of(8, 8, 1.0);
  Result<std::string> put = store->put(key_of(block), block);
  fs::permissions(store->folder(), fs::perms::owner_all);
  ASSERT_TRUE(put.is_ok()) << put.status().to_string();
  EXPECT_NE(put->find("not kept on disk"), std::string::npos) << *put;
  EXPECT_EQ(store->stats().write_failures, 1u);
  EXPECT_NE(store->get(key_of(block)), nullptr);
}

TEST_F(BlockStoreTest, WithoutAFolderItIsMemoryOnly) {
  BlockStoreOptions options;
  options.memory_bytes = 1 << 20;
  Result<std::unique_ptr<BlockStore>> store = BlockStore::open(options);
  ASSERT_TRUE(store.is_ok());
  const Block block = block_of(2, 3, 1.0);
  ASSERT_TRUE((*store)->put(key_of(block), block).is_ok());
  EXPECT_NE((*store)->get(key_of(block)), nullptr);
  EXPECT_TRUE((*store)->folder().empty());
  EXPECT_FALSE(fs::exists(dir_));
}

// A worker's use: disk only (no memory tier), kept from a tile's memory and loaded into another.
TEST_F(BlockStoreTest, DiskOnlyKeepsFromAndLoadsIntoTheCallersMemory) {
  const Block block = block_of(4, 3, 2.0);
  const BlockKey key = key_of(block);
  {
    auto store = open(0, 1 << 20);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->keep_on_disk(key, 4, 3, block.values), "");
    EXPECT_EQ(store->stats().memory_bytes, 0u) << "disk only: nothing held in memory";
    EXPECT_EQ(store->keep_on_disk(key, 4, 3, block.values), "") << "kept twice: still one file";
    EXPECT_EQ(store->stats().disk_bytes, fs::file_size(only_file(*store)));
  }
  auto store = open(0, 1 << 20);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->holds(key)) << "found again by the next worker";
  std::vector<double> out(12, -1.0);
  EXPECT_FALSE(store->load_into(key, 3, 4, out)) << "another shape than the key names";
  EXPECT_TRUE(store->holds(key)) << "a wrong claim does not cost the sound file";
  EXPECT_FALSE(store->load_into(key, 4, 3, std::span<double>(out).first(11))) << "a destination of the wrong size";
  ASSERT_TRUE(store->load_into(key, 4, 3, out));
  EXPECT_EQ(out, block.values);
  EXPECT_EQ(store->stats().disk_hits, 1u);

  // A flipped value in the file: the load fails, the file goes, nothing of it is used.
  {
    std::fstream file(only_file(*store), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-3, std::ios::end);
    file.put('\x7f');
  }
  std::vector<double> again(12, -1.0);
  EXPECT_FALSE(store->load_into(key, 4, 3, again));
  EXPECT_FALSE(store->holds(key));
  EXPECT_EQ(store->stats().dropped, 1u);
  const BlockKey missing = key_of(block_of(1, 1, 9.0));
  EXPECT_FALSE(store->load_into(missing, 1, 1, std::span<double>(again).first(1))) << "never held";

  // Beyond the disk bound: not kept, and said why; within it, the least recently used goes first.
  const Block big = block_of(64, 64, 0.0);
  EXPECT_NE(open(0, 1024)->keep_on_disk(key_of(big), 64, 64, big.values).find("larger than the store's bound"),
            std::string::npos);
}

// Without a folder a worker keeps nothing, and says so.
TEST(BlockStore, NoFolderKeepsNothingAndSaysSo) {
  Result<std::unique_ptr<BlockStore>> store = BlockStore::open(BlockStoreOptions{});
  ASSERT_TRUE(store.is_ok());
  const std::vector<double> values{1.0};
  const BlockKey key = *transport::block_key(1, 1, values);
  EXPECT_NE((*store)->keep_on_disk(key, 1, 1, values).find("no store folder"), std::string::npos);
  EXPECT_FALSE((*store)->holds(key));
}

}  // namespace
}  // namespace tessera::worker
