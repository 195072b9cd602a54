// The delta kernel's cell table at d = 2 (6_fused_delta.cuh, CELLS): a side x side grid over the
// data's range, each cell holding the one centroid seq gives every point of it, or kCellMixed.
// An object in a labelled cell takes that label from a table lookup instead of K scores; the
// others (cells a Voronoi edge crosses, objects outside the grid) are scored as before. Plain
// constexpr/inline, read by nvcc and the host compiler alike: the kernel builds the table with
// cell_label, and a CPU test checks it against seq's arithmetic.
//
// The proof. seq computes D_c = sum_p (x_p - c_p)^2 in T, in coordinate order: |D̂_c - D_c| <=
// g D_c + 2 m (g = gamma_{d+2}(u), m: T's smallest normal, for products that underflow). So c
// beats o (whatever their indices) wherever (1 - g) D_o - (1 + g) D_c - 4 m > 0, which holds
// wherever h = (1 - e) D_o - (1 + e) D_c - t > 0 with e = 64 (d + 2) u >= g and t = 256 m. h is
// concave in x (its x^2 coefficient is (1 - e) - (1 + e) < 0), so its least value over a box is
// at a corner: cell_label checks h at the four corners of the cell grown by kCellGrow of a cell
// on each side, evaluated in double with e and t doubled -- that covers the evaluation's own
// roundings (at most 8 2^-53 (D_o + D_c), far below e (D_o + D_c) >= 256 2^-53 (D_o + D_c)).
//
// The cell an object is looked up in: t_p = fl(fl(x_p - lo_p) inv_p) in float (x_p - lo_p in T,
// then rounded to float for T = double), at most 4 roundings of unit 2^-24 off (x_p - lo_p) / w_p:
// within 4.01 side 2^-24 <= kCellGrow / 2 of a cell for t_p < side. The corners are formed in
// double as lo + (i - grow) w, exact but for the last addition's rounding, at most
// 2^-53 (|lo| + (side + 1) w) <= kCellGrow / 2 of a cell (cell_grid checks both). So an object
// whose computed cell is (i, j) lies in the grown cell, and a labelled cell's label is seq's.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>

#if defined(__CUDACC__)
#define KM_CELLS_HD __host__ __device__
#else
#define KM_CELLS_HD
#endif

namespace km::kernels {

constexpr unsigned char kCellMixed = 255;  // a cell seq does not give to one centroid (or K > 254)
constexpr double kCellGrow = 0x1p-8;      // each cell checked grown by this much of a cell per side
constexpr int kCellMaxSide = 256;  // 64 KB of shared memory per block

// The side fused's one-pass kernel takes by default (0: no table), measured on an H100 (256 MB,
// d = 2, same call): below K = 8 (16 in double) the K scores cost
// less than the lookup and the table's shared memory; 64 x 64 up to K = 32 (16 in float),
// 128 x 128 above (the larger table costs occupancy, the smaller more objects scored).
constexpr int cell_side_for(std::size_t k, std::size_t elem) {
  return k < (elem == 4 ? 8u : 16u) ? 0 : k <= (elem == 4 ? 16u : 32u) ? 64 : 128;
}

struct CellGrid {
  float lo[2] = {0, 0}, w[2] = {0, 0}, inv[2] = {0, 0};
  int side = 0;  // 0: no table
  double e = 0, t = 0;
};

// The grid over [lo, hi] per coordinate (the data's range, hi strictly inside), or side = 0 where the proofs above
// do not hold (a coordinate without extent, a range too narrow for its magnitude, non-finite).
// u, min_normal: T's unit roundoff and smallest normal.
inline CellGrid cell_grid(const double lo[2], const double hi[2], int side, double u, double min_normal) {
  CellGrid g;
  if (side < 1 || side > kCellMaxSide || 4.01 * side * 0x1p-24 > kCellGrow / 2) return g;
  for (int p = 0; p < 2; ++p) {
    if (!(std::isfinite(lo[p]) && std::isfinite(hi[p]) && hi[p] > lo[p])) return g;
    float l = static_cast<float>(lo[p]);
    if (static_cast<double>(l) > lo[p]) l = std::nextafter(l, -FLT_MAX);
    float w = static_cast<float>((hi[p] - static_cast<double>(l)) / side);
    while (std::isfinite(w) && static_cast<double>(l) + side * static_cast<double>(w) <= hi[p])
      w = std::nextafter(w, FLT_MAX);
    const float inv = 1.0f / w;
    if (!(std::isfinite(l) && std::isfinite(w) && w >= FLT_MIN * 0x1p10f && std::isfinite(inv))) return g;
    // The corners' rounding within kCellGrow / 2 of a cell.
    if ((std::fabs(static_cast<double>(l)) + (side + 1.0) * w) * 0x1p-53 > kCellGrow / 2 * w) return g;
    g.lo[p] = l;
    g.w[p] = w;
    g.inv[p] = inv;
  }
  g.side = side;
  g.e = 64.0 * (2 + 2) * u;
  g.t = 256.0 * min_normal;
  return g;
}

// The cell of (x0, x1) as row * side + column, or -1 outside the grid (NaN too).
template <class T>
KM_CELLS_HD inline int cell_of(T x0, T x1, const CellGrid& g) {
  const float t0 = static_cast<float>(x0 - static_cast<T>(g.lo[0])) * g.inv[0];
  const float t1 = static_cast<float>(x1 - static_cast<T>(g.lo[1])) * g.inv[1];
  const float s = static_cast<float>(g.side);
  if (!(t0 >= 0.0f && t0 < s && t1 >= 0.0f && t1 < s)) return -1;
  return static_cast<int>(t1) * g.side + static_cast<int>(t0);
}

// The cell of an object of the grid's own data (lo_p <= x_p <= hi_p, finite: the range the
// engine took from these very objects), with no test: the delta kernel's lean passes. t_p is the
// exact product fl(x_p - lo_p) inv_p truncated to an integer: on the GPU one FMA toward zero
// with 2^23 (float) or 2^52 (double) added leaves it in the result's low bits, no conversion
// (cell_of's float product and truncation take two, and two more in double). Its only roundings
// are x_p - lo_p in T and inv_p's own (a float): within (2^-24 + 2^-53) side of (x_p - lo_p) / w_p,
// inside the 4.01 side 2^-24 the proof above allows. t_p >= 0 (x_p >= lo_p); t_p >= side only
// within that rounding of the grid's edge (hi_p < lo_p + side w_p), a point of the last cell's
// grown box, so the index is clamped to side - 1.
// (inv: the grid's float inv_p, as T: exact.)
template <class T>
KM_CELLS_HD inline int cell_index_in_range(T offset, T inv, int side) {
#if defined(__CUDA_ARCH__)
  int t;
  if constexpr (sizeof(T) == 8) t = __double2loint(__fma_rz(offset, inv, 0x1p52));
  else t = __float_as_int(__fmaf_rz(offset, inv, 0x1p23f)) - 0x4B000000;
  return min(t, side - 1);
#else
  // The same integer on the host: the exact product's floor (for a float offset the product is
  // exact in double; in double an integral rounded product is lowered where the exact one is below).
  const double p = static_cast<double>(offset) * static_cast<double>(inv);
  double f = std::floor(p);
  if (sizeof(T) == 8 && f == p && std::fma(static_cast<double>(offset), static_cast<double>(inv), -p) < 0) f -= 1;
  return static_cast<int>(std::fmin(f, side - 1.0));
#endif
}
template <class T>
KM_CELLS_HD inline int cell_in_range(T x0, T x1, const CellGrid& g) {
  return cell_index_in_range<T>(x1 - static_cast<T>(g.lo[1]), static_cast<T>(g.inv[1]), g.side) * g.side +
         cell_index_in_range<T>(x0 - static_cast<T>(g.lo[0]), static_cast<T>(g.inv[0]), g.side);
}

// The table's sorted order (one_pass_setup.cu: start_sorted; 6_fused_delta.cuh, DeltaPass::work). With the
// objects in the order of their cells (a stable sort by cell_in_range), the delta kernel's whole
// chunks (chunk objects each, `whole` of them) are divided among the cells: a cell whose objects
// are [start, end) of that order owns the chunks whose first object it holds, [first, end) below,
// of which [first, single_end) hold its objects alone and [single_end, end) (at most one) run on
// into the next cells. So each whole chunk has one owner, and a cell whose label held from the
// last table to this one lists only its last, shared chunk to be read (its objects keep their
// labels; their inertia follows from its single chunks' sums, cell_centre, without reading them).
struct OwnedChunks {
  unsigned first = 0, single_end = 0, end = 0;
};
KM_CELLS_HD inline OwnedChunks owned_chunks(unsigned start, unsigned end, unsigned whole, unsigned chunk) {
  const auto cap = [whole](unsigned a) { return a < whole ? a : whole; };
  const auto up = [chunk](unsigned a) { return a / chunk + (a % chunk != 0 ? 1u : 0u); };
  const auto larger = [](unsigned a, unsigned b) { return a > b ? a : b; };
  OwnedChunks o;
  o.first = cap(up(start));
  o.single_end = cap(larger(o.first, end / chunk));
  o.end = cap(larger(o.single_end, up(end)));
  return o;
}
// A held cell's single chunks' inertia by algebra (cell_order.cuh: list_cell_chunks), q = S2 -
// 2 a.S1 + n |a|^2 with a = c - m, from the sums of its n objects' x - m (s0, s1) and |x - m|^2
// (s2), and whether its error bound allows it: each sum came from at most n / 32 + 5 roundings a
// lane and the warp's tree (cell_stats), each term of t bounds a term's magnitude (|x_p - m_p| <= w_p:
// an object lies in its cell grown by its index's rounding), and the combination adds a few:
// E = (n / 32 + 12) 2^-52 t, and `sure` where E <= 2^-40 q (else the cell's objects are read; where
// they sit on their centroid q cancels to near 0). CPU-tested against exact sums (test_margin.cpp).
struct HeldInertia {
  double q = 0;
  bool sure = false;
};
KM_CELLS_HD inline HeldInertia held_cell_inertia(double s0, double s1, double s2, double n, double a0, double a1,
                                                 double w0, double w1) {
  const double aa = a0 * a0 + a1 * a1;
  const double q = s2 - 2 * (a0 * s0 + a1 * s1) + n * aa;
  const double t = s2 + 2 * n * ((a0 < 0 ? -a0 : a0) * w0 + (a1 < 0 ? -a1 : a1) * w1) + n * aa;
  return {q, (n / 32 + 12) * 0x1p-52 * t <= 0x1p-40 * q};
}

// The point a cell's sums are taken about (the centre of its box, in double): near its objects, so
// that the inertia by algebra, S2 - 2 (c - m).S1 + n |c - m|^2, cancels little.
KM_CELLS_HD inline void cell_centre(const CellGrid& g, int cell, double& m0, double& m1) {
  m0 = static_cast<double>(g.lo[0]) + (cell % g.side + 0.5) * static_cast<double>(g.w[0]);
  m1 = static_cast<double>(g.lo[1]) + (cell / g.side + 0.5) * static_cast<double>(g.w[1]);
}

// Cell (i, j)'s box grown by kCellGrow of a cell on each side (corner q: x[q & 1], y[q >> 1]) and
// its centre, in double as the proof above forms them.
struct CellBox {
  double x[2], y[2], cx, cy;
};
KM_CELLS_HD inline CellBox cell_box(int i, int j, const CellGrid& g) {
  CellBox b{{static_cast<double>(g.lo[0]) + (i - kCellGrow) * static_cast<double>(g.w[0]),
             static_cast<double>(g.lo[0]) + (i + 1 + kCellGrow) * static_cast<double>(g.w[0])},
            {static_cast<double>(g.lo[1]) + (j - kCellGrow) * static_cast<double>(g.w[1]),
             static_cast<double>(g.lo[1]) + (j + 1 + kCellGrow) * static_cast<double>(g.w[1])},
            0,
            0};
  b.cx = 0.5 * (b.x[0] + b.x[1]);
  b.cy = 0.5 * (b.y[0] + b.y[1]);
  return b;
}
// Centroid c's squared distance from (px, py) in double; centroids [2][k] in T.
template <class T>
KM_CELLS_HD inline double cell_dist(const T* centroids, int k, int c, double px, double py) {
  const double a = px - static_cast<double>(centroids[c]), b = py - static_cast<double>(centroids[k + c]);
  return a * a + b * b;
}
// Whether the centroid with corner distances dc provably beats centroid o at every corner of b.
template <class T>
KM_CELLS_HD inline bool cell_beats(const T* centroids, int k, int o, const CellBox& b, const double (&dc)[4],
                                   const CellGrid& g) {
  const double lo_f = 1 - 2 * g.e, hi_f = 1 + 2 * g.e, t2 = 2 * g.t;
  for (int q = 0; q < 4; ++q)
    if (!(lo_f * cell_dist(centroids, k, o, b.x[q & 1], b.y[q >> 1]) - hi_f * dc[q] - t2 > 0)) return false;
  return true;
}

// Cell (i, j)'s label (column i, row j): the centroid nearest the cell's centre where it provably
// beats every other over the grown cell (see above), else kCellMixed. centroids [2][k] in T.
template <class T>
KM_CELLS_HD inline int cell_best(const T* centroids, int k, const CellBox& b) {
  int best = 0;
  double bd = cell_dist(centroids, k, 0, b.cx, b.cy);
  for (int c = 1; c < k; ++c) {
    const double v = cell_dist(centroids, k, c, b.cx, b.cy);
    if (v < bd) {
      bd = v;
      best = c;
    }
  }
  return best;
}
template <class T>
KM_CELLS_HD inline unsigned char cell_label(const T* centroids, int k, int i, int j, const CellGrid& g) {
  if (k > 254) return kCellMixed;
  const CellBox b = cell_box(i, j, g);
  const int best = cell_best(centroids, k, b);
  double dc[4];
  for (int q = 0; q < 4; ++q) dc[q] = cell_dist(centroids, k, best, b.x[q & 1], b.y[q >> 1]);
  for (int o = 0; o < k; ++o)
    if (o != best && !cell_beats(centroids, k, o, b, dc, g)) return kCellMixed;
  return static_cast<unsigned char>(best);
}
// Cell (i, j)'s candidates (k <= 64) as a bit mask: the centroid nearest its centre and every one
// it does not provably beat over the grown cell. The others are never seq's label for an object of
// the cell (cell_label_warp's mask, which the delta kernel's lean passes score alone).
template <class T>
KM_CELLS_HD inline unsigned long long cell_candidates(const T* centroids, int k, int i, int j, const CellGrid& g) {
  const CellBox b = cell_box(i, j, g);
  const int best = cell_best(centroids, k, b);
  double dc[4];
  for (int q = 0; q < 4; ++q) dc[q] = cell_dist(centroids, k, best, b.x[q & 1], b.y[q >> 1]);
  unsigned long long mask = 1ull << best;
  for (int o = 0; o < k; ++o)
    if (o != best && !cell_beats(centroids, k, o, b, dc, g)) mask |= 1ull << o;
  return mask;
}

#if defined(__CUDACC__)
// The same label from a whole warp (k <= 64): lane l takes centroids l and l + 32. The same
// distances in the same arithmetic (the helpers above); the nearest to the centre with the lowest
// index among equal distances, as cell_label's scan in index order; mixed where any lane's centroid
// fails a corner test. The same byte as cell_label for every cell (delta_cells: 7.5 us an iteration
// on an H100 with a thread per cell, its K dependent steps in double the whole time).
// With `candidates`, lane 0 gets the cell's candidates as a bit mask (bit c: centroid c): the
// nearest to the centre and every centroid it does not provably beat over the grown cell. Those
// it beats are never seq's label for an object of the cell (nor, being farther than a candidate,
// its runner-up), so such an object needs scores against the candidates alone.
template <class T>
__device__ inline unsigned char cell_label_warp(const T* centroids, int k, int i, int j, const CellGrid& g, int lane,
                                                unsigned long long* candidates = nullptr) {
  const CellBox b = cell_box(i, j, g);
  double bd = INFINITY;
  int best = k;
  for (int c = lane; c < k; c += 32) {
    const double v = cell_dist(centroids, k, c, b.cx, b.cy);
    if (v < bd) {
      bd = v;
      best = c;
    }
  }
  for (int off = 16; off > 0; off /= 2) {
    const double ov = __shfl_xor_sync(0xffffffffu, bd, off);
    const int oc = __shfl_xor_sync(0xffffffffu, best, off);
    if (ov < bd || (ov == bd && oc < best)) {
      bd = ov;
      best = oc;
    }
  }
  double dc[4];
  for (int q = 0; q < 4; ++q) dc[q] = cell_dist(centroids, k, best, b.x[q & 1], b.y[q >> 1]);
  bool kept[2] = {false, false};  // centroids lane and lane + 32: not provably beaten by best
  for (int o = lane, h = 0; o < k; o += 32, ++h) kept[h] = o != best && !cell_beats(centroids, k, o, b, dc, g);
  const unsigned low = __ballot_sync(0xffffffffu, kept[0]), high = __ballot_sync(0xffffffffu, kept[1]);
  if (candidates) *candidates = (static_cast<unsigned long long>(high) << 32 | low) | 1ull << best;
  return low | high ? kCellMixed : static_cast<unsigned char>(best);
}
#endif

}  // namespace km::kernels
