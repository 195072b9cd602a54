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
// d = 2, same call; plots/cells_ab_h100.txt): below K = 8 (16 in double) the K scores cost
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
KM_CELLS_HD inline unsigned char cell_label(const T* centroids, int k, int i, int j, const CellGrid& g) {
  if (k > 254) return kCellMixed;
  const CellBox b = cell_box(i, j, g);
  int best = 0;
  double bd = cell_dist(centroids, k, 0, b.cx, b.cy);
  for (int c = 1; c < k; ++c) {
    const double v = cell_dist(centroids, k, c, b.cx, b.cy);
    if (v < bd) {
      bd = v;
      best = c;
    }
  }
  double dc[4];
  for (int q = 0; q < 4; ++q) dc[q] = cell_dist(centroids, k, best, b.x[q & 1], b.y[q >> 1]);
  for (int o = 0; o < k; ++o)
    if (o != best && !cell_beats(centroids, k, o, b, dc, g)) return kCellMixed;
  return static_cast<unsigned char>(best);
}

#if defined(__CUDACC__)
// The same label from a whole warp (k <= 64): lane l takes centroids l and l + 32. The same
// distances in the same arithmetic (the helpers above); the nearest to the centre with the lowest
// index among equal distances, as cell_label's scan in index order; mixed where any lane's centroid
// fails a corner test. The same byte as cell_label for every cell (delta_cells: 7.5 us an iteration
// on an H100 with a thread per cell, its K dependent steps in double the whole time).
template <class T>
__device__ inline unsigned char cell_label_warp(const T* centroids, int k, int i, int j, const CellGrid& g, int lane) {
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
  bool mixed = false;
  for (int o = lane; o < k; o += 32)
    if (o != best && !cell_beats(centroids, k, o, b, dc, g)) mixed = true;
  return __any_sync(0xffffffffu, mixed) ? kCellMixed : static_cast<unsigned char>(best);
}
#endif

}  // namespace km::kernels
