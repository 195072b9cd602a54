// The one-pass delta kernel's cell table at d = 2 (kernels/kmeans/cells.hpp) on the CPU: every
// object of a labelled cell has seq's label there (objects on bisectors, edges and corners), a
// table labelled without the proof is wrong, and the grid refuses what it cannot prove; the
// cells' sorted order gives every whole chunk one owner, and a held cell's inertia by algebra is
// within its bound wherever it says it is sure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "emulation.hpp"
#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/cpu_steps.hpp"

namespace {

using namespace kmtest;

// The delta kernel's cell table at d = 2 (cells.hpp): every object whose computed cell is
// labelled must have seq's label there. Objects: uniform, on the centroids' bisectors (exact
// and near ties), on and beside the cells' edges and corners; centroids uniform or on a coarse
// lattice (bisectors along the cells' edges, duplicates). `proved` false labels each cell by the
// centroid nearest its centre without the corner test: the check must then find wrong labels.
// Returns the objects found wrong; `labelled` counts those the table labelled.
template <class T>
std::size_t cell_table_wrong(std::size_t k, int side, bool lattice, bool proved, std::uint64_t seed,
                             std::size_t& labelled, std::size_t& objects) {
  using km::kernels::CellGrid;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const double offset = lattice ? 0 : 100;  // away from the origin: the index's rounding counts
  std::vector<T> cs(k * 2);                 // row-major [k][2] for seq
  for (std::size_t c = 0; c < k; ++c)
    for (int p = 0; p < 2; ++p)
      cs[c * 2 + p] = static_cast<T>(lattice ? std::floor(u(rng) * 4) : offset + u(rng));
  std::vector<T> xs;
  auto add = [&](double a, double b) {
    xs.push_back(static_cast<T>(a));
    xs.push_back(static_cast<T>(b));
  };
  const double lo[2] = {offset - 0.1, offset - 0.1}, hi[2] = {offset + (lattice ? 4.1 : 1.1), offset + (lattice ? 4.1 : 1.1)};
  for (int i = 0; i < 20000; ++i) add(lo[0] + u(rng) * (hi[0] - lo[0]), lo[1] + u(rng) * (hi[1] - lo[1]));
  for (std::size_t a = 0; a < k; ++a)
    for (std::size_t b = a + 1; b < k; ++b) {
      // Points on the bisector of a and b, exactly (in T's rounding) and a few ulps off.
      const double ax = cs[a * 2], ay = cs[a * 2 + 1], bx = cs[b * 2], by = cs[b * 2 + 1];
      for (int t = 0; t < 40; ++t) {
        const double s = (u(rng) - 0.5) * 3;
        const double px = 0.5 * (ax + bx) - s * (by - ay), py = 0.5 * (ay + by) + s * (bx - ax);
        const double ulp = std::numeric_limits<T>::epsilon() * (std::fabs(px) + std::fabs(py) + 1);
        for (int q = -2; q <= 2; ++q) add(px + q * ulp * (bx - ax), py + q * ulp * (by - ay));
      }
    }
  const CellGrid g = km::kernels::cell_grid(lo, hi, side, std::numeric_limits<T>::epsilon() / 2,
                                            static_cast<double>(std::numeric_limits<T>::min()));
  EXPECT_EQ(g.side, side);
  for (int i = 0; i <= side; ++i)
    for (int t = 0; t < 8; ++t) {  // the cells' edges and corners, on them and beside them
      const double ex = static_cast<double>(g.lo[0]) + i * static_cast<double>(g.w[0]);
      const double ey = static_cast<double>(g.lo[1]) + (u(rng) * side) * static_cast<double>(g.w[1]);
      const double ulp = std::numeric_limits<T>::epsilon() * (std::fabs(ex) + 1);
      add(ex + (t - 4) * ulp, ey);
      add(ey, ex + (t - 4) * ulp);
      const double cy = static_cast<double>(g.lo[1]) + (i + (t % 3) - 1) * static_cast<double>(g.w[1]);
      add(ex + (t - 4) * ulp, cy);
    }
  // The range's own corners and edges (the largest T at or below hi, the least at or above lo):
  // the lean lookup's clamp.
  auto inward = [](double v, double toward) {
    T t = static_cast<T>(v);
    if ((toward < v && static_cast<double>(t) > v) || (toward > v && static_cast<double>(t) < v))
      t = std::nextafter(t, static_cast<T>(toward));
    return static_cast<double>(t);
  };
  const double in_lo[2] = {inward(lo[0], hi[0]), inward(lo[1], hi[1])}, in_hi[2] = {inward(hi[0], lo[0]), inward(hi[1], lo[1])};
  for (int q = 0; q < 4; ++q) add(q & 1 ? in_hi[0] : in_lo[0], q & 2 ? in_hi[1] : in_lo[1]);
  for (int t = 0; t < 50; ++t) {
    add(in_hi[0], lo[1] + u(rng) * (hi[1] - lo[1]));
    add(lo[0] + u(rng) * (hi[0] - lo[0]), in_hi[1]);
  }
  std::vector<T> coords(2 * k);  // [2][k] for the table
  for (std::size_t c = 0; c < k; ++c) {
    coords[c] = cs[c * 2];
    coords[k + c] = cs[c * 2 + 1];
  }
  std::vector<int> table(static_cast<std::size_t>(side) * side);
  for (int j = 0; j < side; ++j)
    for (int i = 0; i < side; ++i) {
      int label = km::kernels::cell_label(coords.data(), static_cast<int>(k), i, j, g);
      if (!proved) {  // the centroid nearest the centre, unproved
        const T centre[2] = {static_cast<T>(g.lo[0] + (i + 0.5) * g.w[0]), static_cast<T>(g.lo[1] + (j + 0.5) * g.w[1])};
        label = km::nearest_centroid(centre, cs.data(), k, 2);
      }
      table[static_cast<std::size_t>(j) * side + i] = label;
    }
  std::size_t wrong = 0, candidate_checks = 0;
  labelled = 0;
  objects = xs.size() / 2;
  for (std::size_t i = 0; i < objects; ++i) {
    // The lean passes' lookup (cell_in_range), for the objects of the range the grid was built on.
    const double x0 = static_cast<double>(xs[2 * i]), x1 = static_cast<double>(xs[2 * i + 1]);
    if (x0 >= lo[0] && x0 <= hi[0] && x1 >= lo[1] && x1 <= hi[1]) {
      const int lean = km::kernels::cell_in_range(xs[2 * i], xs[2 * i + 1], g);
      if (lean < 0 || lean >= side * side) {
        ADD_FAILURE() << "object (" << x0 << ", " << x1 << "): lean cell " << lean << " off the grid";
      } else if (table[static_cast<std::size_t>(lean)] == km::kernels::kCellMixed) {
        // A mixed cell's object: seq's label among the cell's candidates.
        const int seq = km::nearest_centroid(&xs[2 * i], cs.data(), k, 2);
        const unsigned long long cand =
            km::kernels::cell_candidates(coords.data(), static_cast<int>(k), lean % side, lean / side, g);
        if (proved && !(cand >> seq & 1u)) {
          ++wrong;
          ADD_FAILURE() << "k=" << k << " side=" << side << " object (" << x0 << ", " << x1 << "): seq's " << seq
                        << " not among cell " << lean << "'s candidates " << cand;
        }
        ++candidate_checks;
      } else {
        const int seq = km::nearest_centroid(&xs[2 * i], cs.data(), k, 2);
        if (seq != table[static_cast<std::size_t>(lean)]) {
          ++wrong;
          if (proved)
            ADD_FAILURE() << "k=" << k << " side=" << side << " lattice=" << lattice << " object (" << x0 << ", "
                          << x1 << "): lean cell " << lean << " says " << table[static_cast<std::size_t>(lean)]
                          << ", seq " << seq;
        }
      }
    }
    const int cell = km::kernels::cell_of(xs[2 * i], xs[2 * i + 1], g);
    if (cell < 0 || table[static_cast<std::size_t>(cell)] == km::kernels::kCellMixed) continue;
    ++labelled;
    const int seq = km::nearest_centroid(&xs[2 * i], cs.data(), k, 2);
    if (seq != table[static_cast<std::size_t>(cell)]) {
      ++wrong;
      if (proved)
        ADD_FAILURE() << "k=" << k << " side=" << side << " lattice=" << lattice << " object (" << xs[2 * i] << ", "
                      << xs[2 * i + 1] << "): cell " << cell << " says " << table[static_cast<std::size_t>(cell)]
                      << ", seq " << seq;
    }
  }
  if (proved && k > 1) {
    EXPECT_GT(candidate_checks, 0u) << "k=" << k << " side=" << side << ": no object of a mixed cell";
  }
  return wrong;
}

template <class T>
void check_cell_table() {
  for (const std::size_t k : {1u, 2u, 5u, 16u, 64u})
    for (const int side : {4, 64, 128})
      for (const bool lattice : {false, true}) {
        std::size_t labelled = 0, objects = 0;
        EXPECT_EQ(cell_table_wrong<T>(k, side, lattice, true, 17 + k + side, labelled, objects), 0u);
        // The table does its job: most uniform objects take a cell's label at 128 x 128.
        if (side == 128 && k <= 16 && !lattice) {
          EXPECT_GT(labelled, objects / 2) << "k=" << k << " lattice=" << lattice;
        }
      }
}

TEST(CellTable, FloatGivesSeqLabels) { check_cell_table<float>(); }
TEST(CellTable, DoubleGivesSeqLabels) { check_cell_table<double>(); }

// Without the corner test (each cell labelled by the centroid nearest its centre), objects
// beside the Voronoi edges get labels that are not seq's: the check above can fail.
TEST(CellTable, UnprovedLabelsAreWrong) {
  std::size_t labelled = 0, objects = 0;
  EXPECT_GT(cell_table_wrong<double>(16, 64, false, false, 5, labelled, objects), 0u);
  EXPECT_GT(cell_table_wrong<float>(16, 64, true, false, 5, labelled, objects), 0u);
}

// The grid refuses what its proofs do not cover: a coordinate without extent, a range too
// narrow for its magnitude, a non-finite bound, a side beyond the index's rounding budget.
TEST(CellTable, GridRefusesWhatItCannotProve) {
  const double lo[2] = {0, 0}, hi[2] = {1, 1}, flat[2] = {1, 0};
  EXPECT_EQ(km::kernels::cell_grid(lo, hi, 128, 0x1p-24, FLT_MIN).side, 128);
  EXPECT_EQ(km::kernels::cell_grid(lo, flat, 128, 0x1p-24, FLT_MIN).side, 0);
  const double far_lo[2] = {0x1p40, 0}, far_hi[2] = {0x1p40 + 0x1p-10, 1};
  EXPECT_EQ(km::kernels::cell_grid(far_lo, far_hi, 128, 0x1p-53, DBL_MIN).side, 0);
  const double inf_hi[2] = {INFINITY, 1};
  EXPECT_EQ(km::kernels::cell_grid(lo, inf_hi, 128, 0x1p-24, FLT_MIN).side, 0);
  EXPECT_EQ(km::kernels::cell_grid(lo, hi, 0, 0x1p-24, FLT_MIN).side, 0);
  EXPECT_EQ(km::kernels::cell_grid(lo, hi, km::kernels::kCellMaxSide + 4, 0x1p-24, FLT_MIN).side, 0);
  // Each object of the range lands in a cell; beyond it, none.
  const km::kernels::CellGrid g = km::kernels::cell_grid(lo, hi, 128, 0x1p-24, FLT_MIN);
  EXPECT_GE(km::kernels::cell_of(0.0f, 0.0f, g), 0);
  EXPECT_GE(km::kernels::cell_of(1.0f, 1.0f, g), 0);
  EXPECT_EQ(km::kernels::cell_of(-0.01f, 0.5f, g), -1);
  EXPECT_EQ(km::kernels::cell_of(0.5f, NAN, g), -1);
}

// The cells' sorted order (cells.hpp: owned_chunks): over random cell sizes (empty cells, cells
// smaller and larger than a chunk, a whole run ending on a chunk's edge), every whole chunk has one
// owner, the cell holding its first object; its single chunks hold that cell's objects alone, and
// a cell owns at most one chunk beyond them, which runs on into a later cell. Without the partition
// a chunk would be read twice or never.
TEST(CellOrder, EveryWholeChunkOneOwner) {
  std::mt19937_64 rng(11);
  for (const unsigned chunk : {1u, 4u, 128u}) {
    for (int round = 0; round < 200; ++round) {
      const int cells = 1 + static_cast<int>(rng() % 300);
      std::vector<unsigned> starts(1, 0);
      for (int c = 0; c < cells; ++c) {
        const unsigned kind = static_cast<unsigned>(rng() % 4);
        const unsigned size = kind == 0 ? 0u : kind == 1 ? static_cast<unsigned>(rng() % chunk + 1)
                                          : kind == 2 ? chunk * static_cast<unsigned>(rng() % 3 + 1)
                                                      : static_cast<unsigned>(rng() % (5 * chunk) + 1);
        starts.push_back(starts.back() + size);
      }
      const unsigned n = starts.back(), whole = n / chunk;
      std::vector<int> owner(whole, -1);
      for (int c = 0; c < cells; ++c) {
        const auto o = km::kernels::owned_chunks(starts[c], starts[c + 1], whole, chunk);
        ASSERT_LE(o.first, o.single_end);
        ASSERT_LE(o.single_end, o.end);
        ASSERT_LE(o.end - o.single_end, 1u) << "at most one shared chunk a cell";
        ASSERT_LE(o.end, whole);
        for (unsigned q = o.first; q < o.end; ++q) {
          ASSERT_EQ(owner[q], -1) << "chunk " << q << " owned twice";
          owner[q] = c;
          ASSERT_GE(q * chunk, starts[c]) << "its first object is the owner's";
          ASSERT_LT(q * chunk, starts[c + 1]);
          const bool single = (q + 1) * chunk <= starts[c + 1];
          EXPECT_EQ(single, q < o.single_end) << "chunk " << q << " of cell " << c;
        }
      }
      for (unsigned q = 0; q < whole; ++q) ASSERT_NE(owner[q], -1) << "chunk " << q << " of " << whole << " unowned";
    }
  }
}

// A held cell's inertia by algebra (cells.hpp: held_cell_inertia) from sums formed as cell_stats
// forms them (32 lanes' strided sums in double, then the warp's tree), against the objects' exact
// sum (long double, per object): wherever it says sure, within 2^-40 of it. Uniform objects in
// cells far from the origin (the algebra's terms far above q only when the centroid sits on the
// objects) with the centroid inside, beside or far from the cell: most must be sure (else no cell
// would ever be skipped). All of a cell's objects on one point with the centroid just off it (as
// on quantised data): q cancels, the algebra's own error far above 2^-40 q, and it must refuse.
struct CellCase {
  double s0 = 0, s1 = 0, s2 = 0, n = 0;
  long double exact = 0;
};
CellCase cell_case(const std::vector<double>& xs, const std::vector<double>& ys, double m0, double m1, double c0,
                   double c1) {
  double lane[3][32] = {};
  CellCase r;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double a = xs[i] - m0, b = ys[i] - m1;
    lane[0][i % 32] += a;
    lane[1][i % 32] += b;
    lane[2][i % 32] += a * a + b * b;
    const long double da = static_cast<long double>(xs[i]) - c0, db = static_cast<long double>(ys[i]) - c1;
    r.exact += da * da + db * db;
  }
  for (int off = 16; off > 0; off /= 2)
    for (int l = 0; l < off; ++l)
      for (int q = 0; q < 3; ++q) lane[q][l] += lane[q][l + off];
  r.s0 = lane[0][0];
  r.s1 = lane[1][0];
  r.s2 = lane[2][0];
  r.n = static_cast<double>(xs.size());
  return r;
}

TEST(CellOrder, HeldInertiaWithinItsBound) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int sure = 0, cases = 0;
  for (int round = 0; round < 600; ++round) {
    const double w = std::ldexp(1.0, static_cast<int>(rng() % 20) - 10), m0 = (u(rng) - 0.5) * 2000 * w,
                 m1 = (u(rng) - 0.5) * 2000 * w;
    const std::size_t n = std::size_t{128} << (rng() % 6);
    std::vector<double> xs(n), ys(n);
    for (std::size_t i = 0; i < n; ++i) {
      xs[i] = m0 + (u(rng) - 0.5) * w;
      ys[i] = m1 + (u(rng) - 0.5) * w;
    }
    const double reach = round % 3 == 0 ? 0.5 : round % 3 == 1 ? 2.0 : 40.0;  // inside, beside, far
    const double c0 = m0 + (u(rng) - 0.5) * 2 * reach * w, c1 = m1 + (u(rng) - 0.5) * 2 * reach * w;
    const CellCase c = cell_case(xs, ys, m0, m1, c0, c1);
    const auto h = km::kernels::held_cell_inertia(c.s0, c.s1, c.s2, c.n, c0 - m0, c1 - m1, w, w);
    ++cases;
    if (h.sure) {
      ++sure;
      EXPECT_LE(std::fabs(static_cast<long double>(h.q) - c.exact), 0x1p-40L * c.exact)
          << "n " << n << " w " << w << " reach " << reach;
    }
  }
  EXPECT_GT(sure, cases * 9 / 10) << "the bound refused most uniform cells";
  // All objects on one point p, the centroid 1e-7 of a cell off it.
  int refused = 0, wide = 0;
  for (int round = 0; round < 100; ++round) {
    const double w = 1.0 / 64, m0 = 0.3 + w / 2, m1 = 0.7 + w / 2;
    const double p0 = m0 + (u(rng) - 0.5) * w, p1 = m1 + (u(rng) - 0.5) * w;
    const std::size_t n = 29000;
    const std::vector<double> xs(n, p0), ys(n, p1);
    const double c0 = p0 + 1e-7 * w * (u(rng) - 0.5), c1 = p1 + 1e-7 * w * (u(rng) - 0.5);
    const CellCase c = cell_case(xs, ys, m0, m1, c0, c1);
    const auto h = km::kernels::held_cell_inertia(c.s0, c.s1, c.s2, c.n, c0 - m0, c1 - m1, w, w);
    if (!h.sure) ++refused;
    else
      EXPECT_LE(std::fabs(static_cast<long double>(h.q) - c.exact), 0x1p-40L * c.exact);
    if (std::fabs(static_cast<long double>(h.q) - c.exact) > 0x1p-40L * c.exact) ++wide;
  }
  EXPECT_EQ(refused, 100) << "cancelling cells taken by algebra";
  EXPECT_GT(wide, 50) << "the algebra was within 2^-40 anyway: the case tests nothing";
}

}  // namespace
