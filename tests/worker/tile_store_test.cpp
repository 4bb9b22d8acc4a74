#include "tessera/worker/tile_store.hpp"

#include <gtest/gtest.h>

#include <vector>

#include <cstdint>

namespace tessera::worker {
namespace {

constexpr uint64_t kDouble = sizeof(double);

TEST(TileStore, ReserveChargesBytesAndFindReturnsTheTile) {
  TileStore store(1000 * kDouble);
  auto tile = store.reserve(7, 3, 5, /*zero_fill=*/true);
  ASSERT_TRUE(tile.is_ok()) << tile.status().to_string();
  EXPECT_EQ((*tile)->rows(), 3u);
  EXPECT_EQ((*tile)->cols(), 5u);
  EXPECT_EQ(store.bytes_in_use(), 15 * kDouble);
  EXPECT_EQ(store.tile_count(), 1u);
  EXPECT_EQ(store.find(7), *tile);
  EXPECT_EQ(store.find(8), nullptr);
  for (double v : (*tile)->values()) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>((*tile)->data()) % 64, 0u);
}

// A large tile starts on a 2 MiB boundary, so that it can sit whole in huge pages (a stream over
// small pages ran a quarter slower); a small one only on a cache line.
TEST(TileStore, ALargeTileStartsOnAHugePage) {
  TileStore store(uint64_t{64} << 20);
  for (uint32_t rows : {512u, 700u, 2048u}) {
    auto tile = store.reserve(rows, rows, 1024, /*zero_fill=*/false);
    ASSERT_TRUE(tile.is_ok()) << tile.status().to_string();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>((*tile)->data()) % (uint64_t{2} << 20), 0u) << rows << " rows";
    (*tile)->values()[(*tile)->size() - 1] = 1.0;  // the whole buffer is ours
    ASSERT_TRUE(store.release(rows));
  }
}

TEST(TileStore, CapIsEnforcedBeforeAllocating) {
  TileStore store(100 * kDouble);
  ASSERT_TRUE(store.reserve(1, 10, 9, false).is_ok());  // 90 doubles
  auto over = store.reserve(2, 1, 11, false);
  ASSERT_FALSE(over.is_ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.bytes_in_use(), 90 * kDouble);
  EXPECT_EQ(store.find(2), nullptr);
  EXPECT_TRUE(store.reserve(2, 1, 10, false).is_ok());  // exactly at the cap
  EXPECT_EQ(store.bytes_in_use(), 100 * kDouble);

  // A peer's claim of 8 TiB must fail on the arithmetic, never reach the allocator.
  auto huge = store.reserve(3, 1u << 20, 1u << 20, false);
  ASSERT_FALSE(huge.is_ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  auto absurd = store.reserve(4, UINT32_MAX, UINT32_MAX, false);
  EXPECT_EQ(absurd.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.bytes_in_use(), 100 * kDouble);
}

TEST(TileStore, ZeroDimensionIsRejected) {
  TileStore store(1000);
  EXPECT_EQ(store.reserve(1, 0, 5, false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.reserve(1, 5, 0, false).status().code(), StatusCode::kInvalidArgument);
}

TEST(TileStore, ReplacingAnIdFreesTheOldTile) {
  TileStore store(100 * kDouble);
  ASSERT_TRUE(store.reserve(1, 8, 10, false).is_ok());
  // 80 in use; a replacement of 90 fits because the old 80 go away.
  auto replaced = store.reserve(1, 9, 10, false);
  ASSERT_TRUE(replaced.is_ok()) << replaced.status().to_string();
  EXPECT_EQ(store.bytes_in_use(), 90 * kDouble);
  EXPECT_EQ(store.tile_count(), 1u);
  EXPECT_EQ(store.find(1)->rows(), 9u);
}

TEST(TileStore, FailedReplacementKeepsTheOldTile) {
  TileStore store(100 * kDouble);
  auto old_tile = store.reserve(1, 5, 10, false);
  ASSERT_TRUE(old_tile.is_ok());
  const Tile* old_address = old_tile->get();
  old_tile = store.reserve(2, 1, 1, false);  // drop our extra reference
  auto too_big = store.reserve(1, 11, 10, false);
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.find(1).get(), old_address);
  EXPECT_EQ(store.bytes_in_use(), 51 * kDouble);
}

TEST(TileStore, ReplacingATileAJobHoldsDoesNotCountItsMemoryAsFree) {
  TileStore store(100 * kDouble);
  auto held = store.reserve(1, 6, 10, false);  // a job's reference
  ASSERT_TRUE(held.is_ok());
  EXPECT_EQ(store.reserve(1, 6, 10, false).status().code(), StatusCode::kResourceExhausted);
  held = store.reserve(2, 1, 1, false);
  EXPECT_TRUE(store.reserve(1, 6, 10, false).is_ok());
}

TEST(TileStore, ReleaseFreesMemoryOnceTheLastHolderLetsGo) {
  TileStore store(100 * kDouble);
  auto tile = store.reserve(1, 4, 5, false);
  ASSERT_TRUE(tile.is_ok());
  std::shared_ptr<Tile> job_reference = *tile;
  tile = store.reserve(9, 1, 1, false);
  EXPECT_TRUE(store.release(1));
  EXPECT_FALSE(store.release(1));
  EXPECT_EQ(store.find(1), nullptr);
  EXPECT_EQ(store.bytes_in_use(), 21 * kDouble);  // still held by the "job"
  job_reference.reset();
  EXPECT_EQ(store.bytes_in_use(), 1 * kDouble);
}

TEST(TileStore, ReleaseIfSameLeavesANewerTileAlone) {
  TileStore store(100 * kDouble);
  auto first = store.reserve(1, 2, 2, false);
  ASSERT_TRUE(first.is_ok());
  std::shared_ptr<Tile> first_tile = *first;
  ASSERT_TRUE(store.reserve(1, 3, 3, false).is_ok());  // a STORE replaced the id meanwhile
  EXPECT_FALSE(store.release_if_same(1, first_tile.get()));
  EXPECT_NE(store.find(1), nullptr);
  EXPECT_TRUE(store.release_if_same(1, store.find(1).get()));
  EXPECT_EQ(store.find(1), nullptr);
}

TEST(TileStore, ScratchIsChargedButNotStored) {
  TileStore store(100 * kDouble);
  auto scratch = store.allocate_scratch(5, 5);
  ASSERT_TRUE(scratch.is_ok());
  EXPECT_EQ(store.tile_count(), 0u);
  EXPECT_EQ(store.bytes_in_use(), 25 * kDouble);
  EXPECT_EQ(store.allocate_scratch(10, 10).status().code(), StatusCode::kResourceExhausted);
  scratch = store.allocate_scratch(1, 1);
  EXPECT_EQ(store.bytes_in_use(), 1 * kDouble);
}

TEST(TileStore, ChargeCountsAgainstTheCapWithoutATile) {
  TileStore store(100 * kDouble);
  auto charge = store.charge(60 * kDouble, "graph part");
  ASSERT_TRUE(charge.is_ok()) << charge.status().to_string();
  EXPECT_EQ(store.bytes_in_use(), 60 * kDouble);
  EXPECT_EQ(store.tile_count(), 0u);
  // Tiles and charges share the cap.
  EXPECT_EQ(store.reserve(1, 5, 10, false).status().code(), StatusCode::kResourceExhausted);
  const Result<MemoryCharge> too_much = store.charge(41 * kDouble, "graph part of run 7");
  EXPECT_EQ(too_much.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_much.status().message().find("graph part of run 7 needs 328 bytes"), std::string::npos)
      << too_much.status().to_string();
  EXPECT_EQ(store.bytes_in_use(), 60 * kDouble);
}

TEST(TileStore, ChargeResizesAndGivesEverythingBack) {
  TileStore store(100 * kDouble);
  {
    auto charge = store.charge(10 * kDouble, "part");
    ASSERT_TRUE(charge.is_ok());
    ASSERT_TRUE(charge->resize(100 * kDouble, "part").is_ok());
    EXPECT_EQ(store.bytes_in_use(), 100 * kDouble);
    // A failed growth leaves the charge as it was.
    EXPECT_EQ(charge->resize(101 * kDouble, "part").code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(charge->bytes(), 100 * kDouble);
    ASSERT_TRUE(charge->resize(30 * kDouble, "part").is_ok());
    EXPECT_EQ(store.bytes_in_use(), 30 * kDouble);
    MemoryCharge moved = std::move(*charge);
    EXPECT_EQ(store.bytes_in_use(), 30 * kDouble);
    EXPECT_EQ(moved.bytes(), 30 * kDouble);
    moved.reset();
    EXPECT_EQ(store.bytes_in_use(), 0u);
    ASSERT_TRUE(moved.resize(5 * kDouble, "part").is_ok());
  }
  EXPECT_EQ(store.bytes_in_use(), 0u);
}

TEST(TileStore, ChargeOutlivingTheStoreIsSafe) {
  MemoryCharge survivor;
  {
    TileStore store(100 * kDouble);
    auto charge = store.charge(8, "part");
    ASSERT_TRUE(charge.is_ok());
    survivor = std::move(*charge);
  }
  survivor.reset();  // through the shared counter, like a tile outliving the store
}

TEST(TileStore, ClearDropsEverything) {
  TileStore store(100 * kDouble);
  for (uint32_t id = 0; id < 10; ++id) ASSERT_TRUE(store.reserve(id, 2, 5, false).is_ok());
  EXPECT_EQ(store.bytes_in_use(), 100 * kDouble);
  store.clear();
  EXPECT_EQ(store.tile_count(), 0u);
  EXPECT_EQ(store.bytes_in_use(), 0u);
}

TEST(TileStore, TileOutlivingTheStoreIsSafe) {
  std::shared_ptr<Tile> survivor;
  {
    TileStore store(100 * kDouble);
    auto tile = store.reserve(1, 2, 2, true);
    ASSERT_TRUE(tile.is_ok());
    survivor = *tile;
  }
  survivor->data()[3] = 1.0;
  survivor.reset();  // un-charges through the shared counter; ASan would flag a dangling store
}

TEST(TileStore, FreedBuffersAreReusedForTheSameSizeAlsoAfterClear) {
  TileStore store(4 * 1024 * 1024);  // reuse keeps at most 1 MiB idle
  auto first = store.reserve(1, 128, 128, false);  // 128 KiB
  ASSERT_TRUE(first.is_ok());
  const double* memory = (*first)->data();
  first->reset();
  ASSERT_TRUE(store.release(1));
  EXPECT_EQ(store.bytes_in_use(), 0u);
  EXPECT_EQ(store.idle_bytes(), 128u * 128u * 8u);

  // Same size: the same buffer comes back, charged again, and zero-filled when asked.
  (*store.reserve(1, 128, 128, false))->data()[5] = 42.0;
  ASSERT_TRUE(store.release(1));
  auto again = store.reserve(2, 128, 128, true);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->data(), memory);
  EXPECT_EQ((*again)->data()[5], 0.0);
  EXPECT_EQ(store.bytes_in_use(), 128u * 128u * 8u);
  EXPECT_EQ(store.idle_bytes(), 0u);

  // More than a quarter of the cap is never kept idle.
  std::vector<std::shared_ptr<Tile>> many;
  for (uint32_t id = 10; id < 20; ++id) {
    auto tile = store.reserve(id, 64, 128, false);  // 64 KiB each
    ASSERT_TRUE(tile.is_ok());
    many.push_back(*tile);
  }
  many.clear();
  store.clear();  // a session ended: its memory stays for the next one
  EXPECT_GT(store.idle_bytes(), 0u);
  store.drop_idle_buffers();
  EXPECT_EQ(store.idle_bytes(), 0u);
  auto tile = store.reserve(30, 64, 128, false);
  ASSERT_TRUE(tile.is_ok());
  for (uint32_t id = 40; id < 60; ++id) ASSERT_TRUE(store.reserve(id, 64, 128, false).is_ok());
  tile->reset();
  for (uint32_t id = 40; id < 60; ++id) store.release(id);
  EXPECT_LE(store.idle_bytes(), 1024u * 1024u);
}

// A GEMM probe's matrices (issue 40): kept for reuse, they stayed resident after the session.
TEST(TileStore, ScratchReturnedToTheSystemIsNeverKeptIdle) {
  TileStore store(4 * 1024 * 1024);  // up to 1 MiB may stay idle
  auto kept = store.allocate_scratch(128, 128);  // 128 KiB, kept for reuse by default
  auto returned = store.allocate_scratch(128, 128, /*zero_fill=*/true, AfterUse::kReturnToSystem);
  ASSERT_TRUE(kept.is_ok());
  ASSERT_TRUE(returned.is_ok());
  EXPECT_EQ(store.bytes_in_use(), 2u * 128u * 128u * 8u);
  returned->reset();
  EXPECT_EQ(store.bytes_in_use(), 128u * 128u * 8u);
  EXPECT_EQ(store.idle_bytes(), 0u);
  kept->reset();
  EXPECT_EQ(store.bytes_in_use(), 0u);
  EXPECT_EQ(store.idle_bytes(), 128u * 128u * 8u);
  // It may take an idle buffer of its size; that one then goes back to the system too.
  auto reusing = store.allocate_scratch(128, 128, /*zero_fill=*/false, AfterUse::kReturnToSystem);
  ASSERT_TRUE(reusing.is_ok());
  EXPECT_EQ(store.idle_bytes(), 0u);
  reusing->reset();
  EXPECT_EQ(store.idle_bytes(), 0u);
  EXPECT_EQ(store.bytes_in_use(), 0u);
}

TEST(TileStore, IdleBuffersGiveWayWhenTheCapWouldOtherwiseRefuse) {
  TileStore store(1024 * 1024);  // 256 KiB may stay idle
  ASSERT_TRUE(store.reserve(1, 128, 256, false).is_ok());  // 256 KiB
  ASSERT_TRUE(store.release(1));
  EXPECT_EQ(store.idle_bytes(), 256u * 1024u);
  // A different size that needs the whole cap still fits: the idle buffer goes first.
  auto big = store.reserve(2, 512, 256, false);  // 1 MiB
  ASSERT_TRUE(big.is_ok()) << big.status().to_string();
  EXPECT_EQ(store.idle_bytes(), 0u);
}

// A peer's forwarded tile is filled while the coordinator's JOBs arrive on another connection:
// it must not be found under its id until it is whole (a JOB would compute with half a tile).
TEST(TileStore, AnUnlistedTileIsFoundOnlyOncePublished) {
  TileStore store(1 << 20);
  auto listed = store.reserve(7, 4, 4, /*zero_fill=*/true);
  ASSERT_TRUE(listed.is_ok());
  auto filling = store.reserve_unlisted(7, 4, 4);
  ASSERT_TRUE(filling.is_ok()) << filling.status().to_string();
  EXPECT_EQ(store.find(7), *listed) << "the listed tile stays until the new one is published";
  EXPECT_EQ((*filling)->id(), 7u);
  EXPECT_EQ(store.bytes_in_use(), 2u * 4 * 4 * sizeof(double));
  store.publish(*filling);
  EXPECT_EQ(store.find(7), *filling);
  listed->reset();
  EXPECT_EQ(store.bytes_in_use(), 4u * 4 * sizeof(double)) << "the replaced tile's memory is given back";
  EXPECT_FALSE(store.reserve_unlisted(8, 1024, 1024).is_ok()) << "the cap holds for unlisted tiles too";
}

}  // namespace
}  // namespace tessera::worker
