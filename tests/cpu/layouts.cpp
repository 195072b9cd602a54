// The one-pass kernels' shared-memory layouts (kernels/kmeans/layouts.hpp): the footprints, the
// staged copy's plan covering every chunk once, the crossover rule's shapes fitting the device;
// and the delta kernel's chunk schedule taking every chunk once where the host hands out counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/kmeans/layouts.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

// The dynamic passes' schedule (6_fused_delta.cuh: the lean cell passes, as the staged kernel's in
// double), simulated on the CPU with the warps stepping in a random order: warp g of G takes chunks
// g and g + G, then 2 G + v C + g % C for the v-th count of counter g % C, each count taken a chunk
// ahead and only while the chunk it follows is one to do. Every chunk below the total must be done
// exactly once, for grids the host lets take the counters (delta_chunks_dynamic: G >= C); with
// fewer warps than counters, chunks are lost, which is why the host keeps those grids on fixed
// shares.
std::vector<int> simulate_chunk_schedule(long long warps, long long chunks, unsigned seed) {
  constexpr long long C = km::kernels::kDeltaChunkCounters;
  struct Warp {
    long long c, following;
    unsigned count;
  };
  std::vector<unsigned> counter(C, 0);
  std::vector<int> done(static_cast<std::size_t>(chunks), 0);
  std::vector<Warp> w;
  for (long long g = 0; g < warps; ++g) {
    Warp x{g, g + warps, 0};
    if (x.following < chunks) x.count = counter[g % C]++;
    w.push_back(x);
  }
  std::mt19937 rng(seed);
  std::vector<long long> live;
  for (long long g = 0; g < warps; ++g)
    if (w[g].c < chunks) live.push_back(g);
  while (!live.empty()) {
    const std::size_t pick = rng() % live.size();
    const long long g = live[pick];
    Warp& x = w[g];
    ++done[static_cast<std::size_t>(x.c)];  // (the pass)
    x.c = x.following;
    if (x.c < chunks) {
      x.following = 2 * warps + static_cast<long long>(x.count) * C + g % C;
      if (x.following < chunks) x.count = counter[g % C]++;
    } else {
      live.erase(live.begin() + static_cast<long>(pick));
    }
  }
  return done;
}

TEST(DeltaChunks, EveryChunkOnceWhereTheHostTakesTheCounters) {
  for (const long long blocks : {1LL, 2LL, 3LL, 132LL, 396LL}) {
    for (const int threads : {32, 128, 256}) {
      const long long warps = blocks * (threads / 32);
      for (const long long chunks : {1LL, warps, 2 * warps, 2 * warps + 1, 2 * warps + 17, 7 * warps + 5, 40 * warps + 3}) {
        if (!km::kernels::delta_chunks_dynamic(blocks, threads)) continue;
        for (unsigned seed = 1; seed <= 3; ++seed) {
          SCOPED_TRACE("blocks " + std::to_string(blocks) + " threads " + std::to_string(threads) + " chunks " +
                       std::to_string(chunks) + " seed " + std::to_string(seed));
          const std::vector<int> done = simulate_chunk_schedule(warps, chunks, seed);
          EXPECT_EQ(std::count(done.begin(), done.end(), 1), chunks) << "a chunk lost or done twice";
        }
      }
    }
  }
}

TEST(DeltaChunks, FewerWarpsThanCountersStayOnFixedShares) {
  EXPECT_FALSE(km::kernels::delta_chunks_dynamic(1, 256));   // 8 warps
  EXPECT_TRUE(km::kernels::delta_chunks_dynamic(2, 256));    // 16
  EXPECT_FALSE(km::kernels::delta_chunks_dynamic(15, 32));   // 15
  EXPECT_TRUE(km::kernels::delta_chunks_dynamic(16, 32));
  EXPECT_FALSE(km::kernels::delta_chunks_dynamic(132, 48));  // not whole warps
  // Why: 8 warps and chunks beyond 2 G leave counters 8-15 unread, their chunks never done.
  const std::vector<int> done = simulate_chunk_schedule(8, 200, 1);
  EXPECT_LT(std::count(done.begin(), done.end(), 1), 200);
}

// layouts.hpp: every 16-byte chunk of every coordinate row exactly once over the steps and 32 lanes,
// where the kernel instantiates it (d = 2 with the cells, U = 4; d = 16 and 32, the delta kernel's
// U) and where it does not (d = 8); where a row is at most 32 chunks, a lane's rows step by a
// constant stride and its chunk stays (the kernel's addressing); the buffers hold the rows, the
// labels' row and, with mma, the stage's rows of x''.
TEST(Layouts, StagedCopyPlanCoversEveryChunkOnce) {
  using namespace km::kernels;
  for (int maxd : {2, 8, 16, 32})
    for (std::size_t elem : {4, 8})
      for (int unroll : {1, 2, 4}) {
        SCOPED_TRACE("maxd " + std::to_string(maxd) + " elem " + std::to_string(elem) + " U " + std::to_string(unroll));
        const int rc = tile_row_chunks(unroll, elem), steps = tile_copy_steps(maxd, unroll, elem);
        EXPECT_EQ(rc * 16, 32 * unroll * static_cast<int>(elem));
        if (maxd >= 16 && unroll == delta_unroll(maxd, elem)) {
          EXPECT_GT(steps, 0) << "an instantiated width without a plan";
        }
        if (maxd == 2 && unroll == delta_unroll(2, elem)) {
          EXPECT_GT(steps, 0);
        }
        if (steps == 0) continue;
        std::vector<int> seen(static_cast<std::size_t>(maxd * rc), 0);
        for (int step = 0; step < steps; ++step)
          for (int lane = 0; lane < 32; ++lane) {
            const TileChunk c = tile_chunk(maxd, unroll, elem, step, lane);
            ASSERT_GE(c.row, 0);
            ASSERT_LT(c.row, maxd);
            ASSERT_GE(c.col, 0);
            ASSERT_LT(c.col, rc);
            ++seen[static_cast<std::size_t>(c.row * rc + c.col)];
            if (rc <= 32) {
              const TileChunk f = tile_chunk(maxd, unroll, elem, 0, lane);
              EXPECT_EQ(c.row, f.row + step * (32 / rc));
              EXPECT_EQ(c.col, f.col);
            }
          }
        for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "chunk " << i;
        EXPECT_LE(8 * unroll, 32) << "the labels' row, a chunk a lane";
        for (bool mma : {false, true}) {
          const std::size_t buffer = delta_tile_warp_bytes(maxd, elem, unroll, mma) / 2;
          EXPECT_GE(buffer, static_cast<std::size_t>((maxd + 1) * 32 * unroll) * elem);
          if (mma) {
            EXPECT_GE(buffer, static_cast<std::size_t>(32 * unroll * (maxd + 4)) * 4);
          }
          EXPECT_EQ(buffer % 16, 0u) << "each buffer 16-byte aligned";
        }
      }
  EXPECT_EQ(tile_copy_steps(16, 2, 4), 8) << "d = 16 in float: 16 chunks a row, two rows a step";
  EXPECT_EQ(tile_copy_steps(2, 4, 8), 4) << "d = 2 in double: 64 chunks a row, two steps a row";
  EXPECT_EQ(tile_copy_steps(8, 8, 4), 0) << "labels of 64 U bytes: more chunks than lanes";
}

TEST(Layouts, SharedMemoryFootprints) {
  using namespace km::kernels;
  EXPECT_EQ(centroids_bytes(16, 16, 8), 2048u);
  for (std::size_t k : {1, 2, 3, 16, 17, 257})
    for (std::size_t d : {1, 2, 16, 33})
      for (std::size_t elem : {4, 8}) {
        const BlockSumsLayout<std::size_t> l = block_sums_layout<std::size_t>(k, d, elem);
        EXPECT_EQ(l.counts_offset, k * d * 8);
        EXPECT_GE(l.centroids_offset, l.counts_offset + k * 4);
        EXPECT_EQ(l.centroids_offset % 8, 0u) << "centroids must stay 8-byte aligned";
        EXPECT_EQ(l.bytes, l.centroids_offset + k * d * elem);
      }
  // The delta kernel's centroid rows (above width 2, up to kDeltaRowsMaxK centroids): 16-byte
  // aligned rows of the width and 16 bytes, after the [d][k] centroids; none past them.
  for (std::size_t k : {1, 5, 64, 65, 128, 1024})
    for (std::size_t d : {2, 3, 4, 16, 32})
      for (std::size_t elem : {4, 8}) {
        const DeltaLayout<std::size_t> l = delta_layout<std::size_t>(k, d, elem);
        const int maxd = fused_register_width(d);
        EXPECT_EQ(l.rows_offset % 16, 0u);
        EXPECT_GE(l.rows_offset, l.centroids_offset + k * d * elem);
        const std::size_t row = d > 2 && k <= 64 ? static_cast<std::size_t>(maxd) + 16 / elem : 0;
        EXPECT_EQ(l.bytes, l.rows_offset + k * row * elem) << k << " " << d << " " << elem;
        EXPECT_EQ(row * elem % 16, 0u) << "each row starts 16-byte aligned";
      }
  EXPECT_EQ(fused_register_width(1), 1);
  EXPECT_EQ(fused_register_width(3), 4);
  EXPECT_EQ(fused_register_width(16), 16);
  EXPECT_EQ(fused_register_width(17), 32);
  EXPECT_EQ(fused_unroll(2), 8);
  EXPECT_EQ(fused_unroll(16), 2);
  EXPECT_EQ(fused_unroll(32), 1);
  EXPECT_TRUE(fused_owner_lanes(16, 32));
  EXPECT_FALSE(fused_owner_lanes(16, 33));
  EXPECT_FALSE(fused_owner_lanes(4, 16));
  EXPECT_TRUE(fused_one_pass(16, 16, 8));
  EXPECT_FALSE(fused_one_pass(16, 33, 8)) << "d > 32 takes the tensor path";
  EXPECT_FALSE(fused_one_pass(1024, 128, 4));
  // The measured crossover (layouts.hpp): one pass for d <= 4 at any K that fits, and for
  // d <= 8 in float; up to K*d = 4096 otherwise (d = 8 up to K = 512 in double, d = 16 up to
  // K = 256, d = 32 up to K = 128).
  EXPECT_TRUE(fused_one_pass(1024, 2, 8));
  EXPECT_TRUE(fused_one_pass(1024, 4, 8));
  EXPECT_TRUE(fused_one_pass(1024, 8, 4));
  EXPECT_TRUE(fused_one_pass(512, 8, 8));
  EXPECT_FALSE(fused_one_pass(1024, 8, 8)) << "the tensor path with the movers' scheme: 1.12 against 1.30 ms";
  EXPECT_TRUE(fused_one_pass(128, 16, 8));
  EXPECT_TRUE(fused_one_pass(256, 16, 8));
  EXPECT_TRUE(fused_one_pass(256, 16, 4));
  EXPECT_FALSE(fused_one_pass(512, 16, 8));
  EXPECT_FALSE(fused_one_pass(512, 16, 4));
  EXPECT_TRUE(fused_one_pass(128, 32, 8));
  EXPECT_TRUE(fused_one_pass(128, 32, 4));
  EXPECT_FALSE(fused_one_pass(256, 32, 8));
  EXPECT_FALSE(fused_one_pass(256, 32, 4));
  EXPECT_FALSE(fused_one_pass(8192, 4, 8)) << "one pass only while its shared memory fits (200 KB)";
  // Wherever the rule gives one pass above K*d = 1024, the delta kernel fits an H100/H200 block
  // (227 KB opt-in), so the engine never falls back there to the classic kernel (20x slower at
  // d = 32, K = 256); at d = 32, K = 256 (outside the rule) it does not fit.
  for (std::size_t d = 9; d <= 32; ++d)
    for (std::size_t k = 2; k * d <= 4096; ++k)
      for (std::size_t elem : {std::size_t{4}, std::size_t{8}})
        if (fused_one_pass(k, d, elem)) {
          EXPECT_LE(delta_shared_bytes(k, d, elem), 232448u) << d << " " << k << " " << elem;
        }
  EXPECT_GT(delta_shared_bytes(256, 32, 8), 232448u);
}

}  // namespace
