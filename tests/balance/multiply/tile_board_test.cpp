// The tile board alone: which tile a node gets, what a lost node's tiles become, who wins a
// speculative copy, and when the run is complete.
#include "tessera/balance/multiply/tile_board.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

namespace tessera::balance {
namespace {

using partition::Block;

multiply::WorkTile tile(uint64_t row_begin, uint64_t rows, int assigned, std::optional<std::size_t> parent = std::nullopt) {
  multiply::WorkTile t;
  t.block = Block{row_begin, rows, 0, 4, 0, 4};
  t.assigned = assigned;
  t.parent = parent;
  return t;
}

std::optional<uint64_t> take(multiply::TileBoard& board, int node) {
  bool copy = false;
  return board.take(node, false, copy);
}

TEST(TileBoard, StaticNodesTakeTheirOwnTilesThenTheRunIsDone) {
  multiply::Work work;
  work.tiles = {tile(0, 4, 0), tile(4, 4, 1), tile(8, 4, 0)};
  multiply::TileBoard board(work);
  EXPECT_EQ(take(board, 1), 1u);
  EXPECT_EQ(take(board, 1), std::nullopt) << "node 1 has no more of its own and must not take node 0's";
  EXPECT_EQ(take(board, 0), 0u);
  EXPECT_EQ(take(board, 0), 2u);
  EXPECT_FALSE(board.all_done());
  EXPECT_TRUE(board.finish(0, 0));
  EXPECT_TRUE(board.finish(1, 1));
  EXPECT_TRUE(board.finish(2, 0));
  EXPECT_TRUE(board.all_done());
  EXPECT_EQ(take(board, 0), std::nullopt);
}

TEST(TileBoard, ALostNodesTilesAreReissuedToWhoeverAsks) {
  multiply::Work work;
  work.tiles = {tile(0, 4, 0), tile(4, 4, 1), tile(8, 4, 1)};
  multiply::TileBoard board(work);
  ASSERT_EQ(take(board, 1), 1u);  // running on node 1, tile 2 still pending there
  std::vector<uint64_t> reissued;
  board.node_lost(1, reissued);
  std::sort(reissued.begin(), reissued.end());
  EXPECT_EQ(reissued, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(take(board, 0), 0u);  // its own first
  EXPECT_EQ(take(board, 0), 1u);
  EXPECT_EQ(take(board, 0), 2u);
  for (uint64_t t : {0u, 1u, 2u}) EXPECT_TRUE(board.finish(t, 0));
  EXPECT_TRUE(board.all_done());
}

TEST(TileBoard, ALostTileWithSparesIsSharedByTheSurvivors) {
  multiply::Work work;
  work.tiles = {tile(0, 9, 0), tile(0, 3, -1, 0), tile(3, 3, -1, 0), tile(6, 3, -1, 0), tile(9, 3, 1)};
  multiply::TileBoard board(work);
  ASSERT_EQ(take(board, 0), 0u);
  EXPECT_EQ(take(board, 1), 4u);
  EXPECT_EQ(take(board, 1), std::nullopt) << "spares stay dormant while their tile's node lives";
  std::vector<uint64_t> reissued;
  board.node_lost(0, reissued);
  EXPECT_EQ(reissued, (std::vector<uint64_t>{0}));
  EXPECT_EQ(take(board, 1), 1u);
  EXPECT_EQ(take(board, 2), 2u);
  EXPECT_EQ(take(board, 1), 3u);
  EXPECT_FALSE(board.finish(0, 0)) << "the split tile's own result is void";
  for (uint64_t t : {1u, 2u, 3u, 4u}) {
    EXPECT_FALSE(board.all_done());
    EXPECT_TRUE(board.finish(t, t == 2 ? 2 : 1));
  }
  EXPECT_TRUE(board.all_done());
}

// Spares cut for particular nodes go to those nodes; one cut for a node lost before goes to
// whoever asks.
TEST(TileBoard, SparesGoToTheNodesTheyWereCutForOrToAnyoneWhenThatNodeIsLost) {
  multiply::Work work;
  // Tile 0 (node 0) has spares for nodes 1 and 2; tile 3 (node 1) for nodes 0 and 2.
  work.tiles = {tile(0, 9, 0), tile(0, 6, 1, 0), tile(6, 3, 2, 0), tile(9, 9, 1), tile(9, 6, 0, 3), tile(15, 3, 2, 3)};
  multiply::TileBoard board(work);
  ASSERT_EQ(take(board, 0), 0u);
  ASSERT_EQ(take(board, 1), 3u);
  std::vector<uint64_t> reissued;
  board.node_lost(0, reissued);
  EXPECT_EQ(take(board, 2), 2u) << "node 2's piece of tile 0, not node 1's larger one";
  EXPECT_EQ(take(board, 2), std::nullopt) << "node 1's piece waits for node 1";
  board.node_lost(1, reissued);
  // Tile 3's spare for node 0 (lost first) goes to whoever asks, and so does node 1's piece of tile 0.
  std::set<uint64_t> taken;
  for (int i = 0; i < 3; ++i) {
    std::optional<uint64_t> t = take(board, 2);
    ASSERT_TRUE(t.has_value()) << i;
    taken.insert(*t);
  }
  EXPECT_EQ(taken, (std::set<uint64_t>{1, 4, 5}));
  for (uint64_t t : {1u, 2u, 4u, 5u}) EXPECT_TRUE(board.finish(t, 2));
  EXPECT_TRUE(board.all_done());
}

TEST(TileBoard, DynamicIdleNodesCopyTheOldestRunningTileAndTheFirstResultWins) {
  multiply::Work work;
  work.speculate = true;
  work.tiles = {tile(0, 4, -1), tile(4, 4, -1)};
  multiply::TileBoard board(work);
  bool copy = true;
  EXPECT_EQ(board.take(0, false, copy), 0u);
  EXPECT_FALSE(copy);
  EXPECT_EQ(board.take(1, false, copy), 1u);
  EXPECT_FALSE(copy);
  EXPECT_EQ(board.take(2, false, copy), 0u) << "the oldest running tile";
  EXPECT_TRUE(copy);
  EXPECT_EQ(board.take(0, false, copy), 1u) << "never a copy of one's own tile";
  EXPECT_TRUE(copy);
  EXPECT_EQ(board.take(3, false, copy), std::nullopt) << "one copy per tile";
  EXPECT_EQ(board.copies(), 2u);
  EXPECT_TRUE(board.finish(0, 2));  // the copy won
  EXPECT_FALSE(board.finish(0, 0));
  EXPECT_TRUE(board.finish(1, 1));  // the original won
  EXPECT_FALSE(board.finish(1, 0));
  EXPECT_EQ(board.copy_wins(), 1u);
  EXPECT_TRUE(board.all_done());
}

TEST(TileBoard, ACopyIsHandedOutOnlyWhereTheFilterSaysItPaysAndSettledTilesAreSeen) {
  multiply::Work work;
  work.speculate = true;
  work.tiles = {tile(0, 4, -1), tile(4, 4, -1), tile(8, 4, -1)};
  multiply::TileBoard board(work);
  bool copy = false;
  ASSERT_EQ(board.take(0, false, copy), 0u);
  ASSERT_EQ(board.take(1, false, copy), 1u);
  ASSERT_EQ(board.take(1, false, copy), 2u);
  std::vector<std::pair<uint64_t, int>> asked;
  const multiply::TileBoard::CopyFilter only_tile_2 = [&](uint64_t t, int owner, double running_s) {
    asked.emplace_back(t, owner);
    EXPECT_GE(running_s, 0.0);
    return t == 2;
  };
  // Tile 0 is the oldest, but the filter refuses it (and tile 1): the copy is of tile 2.
  EXPECT_EQ(board.take(3, false, copy, only_tile_2), 2u);
  EXPECT_TRUE(copy);
  EXPECT_EQ(asked.size(), 3u);
  const multiply::TileBoard::CopyFilter never = [](uint64_t, int, double) { return false; };
  EXPECT_EQ(board.take(4, false, copy, never), std::nullopt) << "no copy pays: nothing to do";
  EXPECT_EQ(board.copies(), 1u);

  EXPECT_FALSE(board.settled(2));
  EXPECT_TRUE(board.finish(2, 1));  // the original won; the copy's sender sees it settled
  EXPECT_TRUE(board.settled(2));
  EXPECT_FALSE(board.settled(0));
}

TEST(TileBoard, AWaitingNodeWhoseCopiesDoNotPayWakesWhenTheRunEnds) {
  multiply::Work work;
  work.speculate = true;
  work.tiles = {tile(0, 4, -1)};
  multiply::TileBoard board(work);
  bool copy = false;
  ASSERT_EQ(board.take(0, false, copy), 0u);
  std::optional<uint64_t> taken = 7;
  std::thread waiter([&] {
    bool is_copy = false;
    taken = board.take(1, true, is_copy, [](uint64_t, int, double) { return false; });
  });
  EXPECT_TRUE(board.finish(0, 0));
  waiter.join();
  EXPECT_EQ(taken, std::nullopt);
}

TEST(TileBoard, ANodeWhoseStartDoesNotPayTakesNoFreshTileUntilTheOthersAreLost) {
  multiply::Work work;
  work.tiles = {tile(0, 4, -1), tile(4, 4, -1), tile(8, 4, -1)};
  work.speculate = true;
  multiply::TileBoard board(work);
  std::size_t seen_remaining = 0;
  bool saw_others_started = false;
  // Node 2 pays for its first tile only once both others are gone.
  const multiply::TileBoard::StartFilter slow_start = [&](uint64_t, const multiply::TileBoard::BoardView& view) {
    seen_remaining = view.remaining;
    saw_others_started = view.started.size() > 1 && view.started[0] && view.started[1];
    return view.lost.size() > 1 && view.lost[0] && view.lost[1];
  };
  // Its copies would not pay either (the driver's copy filter counts all of B too).
  const multiply::TileBoard::CopyFilter no_copies = [](uint64_t, int, double) { return false; };
  bool copy = false;
  EXPECT_EQ(board.take(2, false, copy, no_copies, slow_start), std::nullopt);
  EXPECT_EQ(seen_remaining, 3u);
  EXPECT_EQ(take(board, 0), 0u);
  EXPECT_EQ(take(board, 1), 1u);
  EXPECT_EQ(board.take(2, false, copy, no_copies, slow_start), std::nullopt);
  EXPECT_TRUE(saw_others_started) << "nodes 0 and 1 took tiles, so they count as started";
  std::vector<uint64_t> reissued;
  board.node_lost(0, reissued);
  EXPECT_EQ(board.take(2, false, copy, no_copies, slow_start), std::nullopt) << "node 1 still runs";
  // A node waiting in take() sees the filter change its mind when the last other node is lost.
  std::optional<uint64_t> waited;
  std::thread waiter([&] { waited = board.take(2, true, copy, no_copies, slow_start); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  board.node_lost(1, reissued);
  waiter.join();
  ASSERT_TRUE(waited.has_value());
  EXPECT_FALSE(copy);
}

TEST(TileBoard, ALostOwnerHandsARunningTileToItsCopyHolder) {
  multiply::Work work;
  work.speculate = true;
  work.tiles = {tile(0, 4, -1)};
  multiply::TileBoard board(work);
  bool copy = false;
  ASSERT_EQ(board.take(0, false, copy), 0u);
  ASSERT_EQ(board.take(1, false, copy), 0u);
  ASSERT_TRUE(copy);
  std::vector<uint64_t> reissued;
  board.node_lost(0, reissued);
  EXPECT_TRUE(reissued.empty()) << "the copy holder carries on; nothing is handed out again";
  EXPECT_TRUE(board.finish(0, 1));
  EXPECT_TRUE(board.all_done());
}

TEST(TileBoard, AWaitingNodeWakesWhenALostTileComesBackOrTheRunAborts) {
  multiply::Work work;
  work.tiles = {tile(0, 4, -1)};
  multiply::TileBoard board(work);
  ASSERT_EQ(take(board, 0), 0u);
  std::optional<uint64_t> got;
  std::jthread waiter([&] {
    bool copy = false;
    got = board.take(1, true, copy);
  });
  std::vector<uint64_t> reissued;
  board.node_lost(0, reissued);
  waiter.join();
  EXPECT_EQ(got, 0u);

  multiply::TileBoard aborted(work);
  ASSERT_EQ(take(aborted, 0), 0u);
  std::jthread second([&] {
    bool copy = false;
    got = aborted.take(1, true, copy);
  });
  aborted.abort();
  second.join();
  EXPECT_EQ(got, std::nullopt);
  EXPECT_TRUE(aborted.all_done());
}

}  // namespace
}  // namespace tessera::balance

namespace tessera::balance {
namespace {

// A node that began reading a result into C and then failed did not finish the tile: the tile is
// handed out again, and the node that finishes it is first.
TEST(TileBoardReceive, AResultThatFailsHalfWayLeavesTheTileToBeReissued) {
  multiply::Work work;
  work.tiles = {tile(0, 4, 0), tile(4, 4, 1)};
  multiply::TileBoard board(work);
  ASSERT_EQ(take(board, 0), 0u);
  ASSERT_EQ(take(board, 1), 1u);
  EXPECT_TRUE(board.begin_receive(0, 0));
  EXPECT_FALSE(board.begin_receive(0, 1)) << "one reader into C at a time";
  std::vector<uint64_t> reissued;
  board.node_lost(0, reissued);  // its read broke off
  EXPECT_EQ(reissued, std::vector<uint64_t>{0});
  EXPECT_FALSE(board.all_done());
  ASSERT_EQ(take(board, 1), 0u);
  EXPECT_TRUE(board.begin_receive(0, 1));
  EXPECT_TRUE(board.finish(0, 1));
  EXPECT_TRUE(board.finish(1, 1));
  EXPECT_TRUE(board.all_done());
  EXPECT_FALSE(board.begin_receive(0, 1)) << "a done tile takes no more results into C";
}

// A second result for a tile whose result is landing in C waits for that one: it loses if that
// one completes, and wins if its node is lost half-way.
TEST(TileBoardReceive, ASecondResultWaitsForTheOneLandingInC) {
  for (bool receiver_fails : {false, true}) {
    SCOPED_TRACE(receiver_fails);
    multiply::Work work;
    work.speculate = true;
    work.tiles = {tile(0, 4, -1)};
    multiply::TileBoard board(work);
    bool copy = false;
    ASSERT_EQ(board.take(0, false, copy), 0u);
    ASSERT_EQ(board.take(1, false, copy), 0u);
    ASSERT_TRUE(copy);
    ASSERT_TRUE(board.begin_receive(0, 0));
    bool second_first = true;
    std::thread second([&] { second_first = board.finish(0, 1); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // give it the chance to decide early
    if (receiver_fails) {
      std::vector<uint64_t> reissued;
      board.node_lost(0, reissued);
    } else {
      EXPECT_TRUE(board.finish(0, 0));
    }
    second.join();
    EXPECT_EQ(second_first, receiver_fails);
    EXPECT_TRUE(board.all_done());
  }
}

}  // namespace
}  // namespace tessera::balance
