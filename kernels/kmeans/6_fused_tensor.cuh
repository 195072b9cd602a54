// Step 6, fused, its tensor path (any K and d): distances and the arg-min fused on the tensor
// cores, the N×K matrix never written, and seq's labels exactly.
//
//   fused_tensor_assign  A block takes BM objects and walks every centroid in tiles of BN,
//                        each tile's products x.c' (c' = c - mu, centred on the data's mean)
//                        accumulated over d in BK slices by mma.sync (FP64 DMMA in double, TF32
//                        in float) from a cp.async ring: the GEMM ladder's tensor kernel
//                        (kernels/gemm/6_tensor.cuh) supplies the mma shapes, the tile geometry
//                        and cp.async; the stage loads are this kernel's own (each thread's
//                        copy addresses worked out once). In float the fragments come by
//                        ldmatrix, with PRE from objects already centred and rounded in a copy.
//                        After a tile, the key |c'|^2 + 2mu.c' - 2x.c' of every pair goes into
//                        the object's running list of its L smallest (registers; in float one
//                        list per row and warp, the keys passed to their row's lane through
//                        shared memory 8 at a time, their least compared first); the lists
//                        then merge across lanes and warps. The key is not seq's arithmetic;
//                        margin.hpp bounds how far it can be, and an object whose runner-up
//                        lies within that margin is queued for a re-check: with the listed
//                        candidates within the margin when the list's last is beyond it, else
//                        with every centroid.
//   recheck_nearest      A warp per queued object: seq's direct formula, in seq's order and
//                        rounding, over the queued candidates; the lowest index wins ties.
//   recheck_all          The same against every centroid: a warp per (object, 32 centroids),
//                        the least sum by atomicMin, then the lowest centroid that has it.
//   accumulate_sorted    The objects sorted by label (CUB radix sort), then summed in fixed
//                        chunks of the sorted order: the fixed-point sums and counts (update.cuh:
//                        to_fixed; integer atomics, the same bits in any order) and the inertia.
#pragma once

#include <cfloat>
#include <climits>
#include <cstdint>

#include "kernels/gemm/6_tensor.cuh"
#include "kernels/kmeans/candidate_lists.cuh"
#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/margin.hpp"
#include "kernels/kmeans/nearest.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

__device__ __forceinline__ float fused_mul_add(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fused_mul_add(double a, double b, double c) { return __fma_rn(a, b, c); }

__device__ __forceinline__ float key_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double key_min(double a, double b) { return fmin(a, b); }

// ldmatrix.x4 of 32-bit elements: lanes 8q..8q+7 name the rows (16 bytes each) of quarter
// q, and lane l receives word l % 4 of row l / 4 of each quarter -- for TF32 exactly the mma
// fragments' (g, t) ownership.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const float* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// seq's squared distance (nearest.cuh: seq_add, in coordinate order).
template <class T>
__device__ __forceinline__ T seq_distance(const T* x, const T* c, int d) {
  T s = 0;
  for (int p = 0; p < d; ++p) s = seq_add(s, x[p], c[p]);
  return s;
}

// The tile shape: 128 objects x 128 centroids a block, in 16 warps of 32 objects x 32
// centroids, 4 along each. L keys are kept per object: 4 in float, whose TF32 keys leave several candidates
// within the margin more often, 2 in double.
// SHORT (float, d <= 16): 16-deep slices, so a short d is not padded to 32. DEPTH and NSTAGES,
// when given, set the slice depth and the ring's stages (double on sm_90 with d > 16: 32 x 3;
// float with d > 32: 64 x 3).
template <class Mma, bool SHORT = false, int DEPTH = 0, int NSTAGES = 3>
struct TensorAssignShape {
  static constexpr bool is_double = sizeof(typename Mma::T) == 8;
  // 16 warps of 32 objects (4 along the objects), so 4 warps per scheduler hide the mma and
  // fold latencies at <= 128 registers. 8 warps of 64 measured 1-19% slower in double, and in
  // float 4-20% slower on four real-data rows, 2-4% faster at d = 784 (one warp shape kept):
  // plots/tensor_double_wm_ab_h200.txt, tensor_float_ab.txt.
  static constexpr int WM = 32, WN = 32, BM = 128, BN = 4 * WN;
  static constexpr int BK = DEPTH ? DEPTH : is_double || SHORT ? 16 : 32, STAGES = NSTAGES;
  static constexpr int L = is_double ? 2 : 4;
  // Float centres the objects too, on their way into the mma (x' = x - mu, then cvt.rna):
  // TF32 keys are coarse, and the margin shrinks with |x'| (half of |x| or less on typical
  // data). Double's keys are fine enough with the centroids alone centred.
  static constexpr bool centre_objects = !is_double;
  static constexpr int threads = (BM / WM) * (BN / WN) * 32;
  static constexpr int warps_n = BN / WN;
  // Centroid tiles per stage: float with d <= 16 (one 16-deep slice) takes four, so a barrier
  // and a stage's set-up serve 512 centroids, not 128 (H200, d = 16, K = 65536: 50.4 -> 45.5 ms
  // with two, 43.0 with four; plots/tensor_float_ab.txt).
  static constexpr int CPS = !is_double && SHORT ? 4 : 1;
  static constexpr int BNS = BN * CPS;
};

template <class Mma, bool SHORT = false, int DEPTH = 0, int NSTAGES = 3>
constexpr std::size_t tensor_assign_smem_bytes() {
  using S = TensorAssignShape<Mma, SHORT, DEPTH, NSTAGES>;
  using T = typename Mma::T;
  using TA = gemm::TileGeometry<T, true, S::BM, S::BK>;
  using TB = gemm::TileGeometry<T, true, S::BNS, S::BK>;
  const std::size_t ring =
      std::size_t(S::STAGES) * (TA::elems + TB::elems + (S::centre_objects ? S::BK : 0) + S::BNS) * sizeof(T) +
      (S::is_double ? 0 : std::size_t(S::threads) * 8 * sizeof(T));  // float: each warp's 32 x 8 key chunk
  const std::size_t lists = std::size_t(S::warps_n) * S::BM * sizeof(TopL<T, S::L>);
  return ring > lists ? ring : lists;
}

// The object operand as the mma reads it: FP64 as is; for TF32 the FP32 bits as they are
// (the mma ignores the low 13: truncation, margin.hpp's u_x = 2^-10), which saves a
// conversion per element. Centroids go through Mma::convert (cvt.rna: 2^-11).
template <class Mma>
__device__ __forceinline__ typename Mma::Reg object_operand(typename Mma::T v) {
  if constexpr (sizeof(typename Mma::Reg) == sizeof(float) && sizeof(typename Mma::T) == sizeof(float))
    return __float_as_uint(v);
  else
    return v;
}

// x: row-major [n][d]; mu[d]: the centre; centred: row-major [k][d], c' = c - mu; keyed[k] =
// |c'|^2 + 2 mu.c' in T (|c'|^2 when the objects are centred too), padded with +inf to a
// multiple of kKeyPad (candidate_lists.cuh: no bounds test per key); cmax2: the largest |c'|^2
// (double); xc2[n] = |x - mu|^2 (double); mu_norm = |mu| (0 when the objects are centred).
// Key of (x, c) = keyed - 2 x.c' (or - 2 x'.c'; margin.hpp). Writes every object's candidate label to
// labels and queues those that need seq's formula: with their candidates in queue (length
// queued[0]), or, to be checked against every centroid, in everyone (length queued[1]).
template <class Mma, int VEC, bool SHORT, int DEPTH = 0, int NSTAGES = 3, bool PRE = false>
__global__ void __launch_bounds__(TensorAssignShape<Mma, SHORT, DEPTH, NSTAGES>::threads, 1)
    fused_tensor_assign(const typename Mma::T* __restrict__ x, const typename Mma::T* __restrict__ mu,
                        const typename Mma::T* __restrict__ centred,
                        const typename Mma::T* __restrict__ keyed, const double* __restrict__ cmax2,
                        const double* __restrict__ xc2, double mu_norm, std::int64_t n, int d, int k,
                        CandidateBound bound, std::int32_t* __restrict__ labels, Recheck* __restrict__ queue,
                        std::int64_t* __restrict__ everyone, unsigned long long* __restrict__ queued,
                        const std::int32_t* __restrict__ prev) {
  using T = typename Mma::T;
  using Reg = typename Mma::Reg;
  using S = TensorAssignShape<Mma, SHORT, DEPTH, NSTAGES>;
  constexpr int BM = S::BM, BN = S::BN, BK = S::BK, WM = S::WM, WN = S::WN, STAGES = S::STAGES, NT = S::threads;
  constexpr int L = S::L;
  using TA = gemm::TileGeometry<T, true, BM, BK>;
  constexpr int CPS = S::CPS, BNS = S::BNS;
  using TB = gemm::TileGeometry<T, true, BNS, BK>;
  constexpr int H = Mma::C / 2;  // accumulator rows per mma tile per thread
  constexpr int FM = WM / Mma::M, FN = WN / Mma::N, ROWS = FM * H;
  static_assert(Mma::C == 4 || Mma::C == 2, "accumulator layouts of the mma shapes used here");
  static_assert(kKeyPad % BNS == 0, "a stage's keys lie within the padded keys");

  extern __shared__ __align__(16) unsigned char fused_tensor_raw[];
  T* smem = reinterpret_cast<T*>(fused_tensor_raw);
  // A stage: the objects' slice, the centroids' slice, mu's slice (float), the centroids' keys.
  constexpr int MU = S::centre_objects ? BK : 0;
  constexpr int STAGE = TA::elems + TB::elems + MU + BNS;
  auto stage_a = [&](int s) { return smem + s * STAGE; };
  auto stage_b = [&](int s) { return smem + s * STAGE + TA::elems; };
  auto stage_mu = [&](int s) { return smem + s * STAGE + TA::elems + TB::elems; };
  auto stage_key = [&](int s) { return smem + s * STAGE + TA::elems + TB::elems + MU; };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gq = lane / 4, tq = lane % 4;
  const int wn = warp % (BN / WN);
  const int wm0 = (warp / (BN / WN)) * WM, wn0 = wn * WN;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * BM;
  const int rows_here = static_cast<int>(n - row0 < BM ? n - row0 : BM);
  const T* xb = x + row0 * d;

  const int dtiles = (d + BK - 1) / BK, ctiles = (k + BNS - 1) / BNS;  // stages of centroids
  const int tiles = dtiles * ctiles;
  // Each thread's VEC-element copies of a stage, worked out once: the tile row and column of
  // copy q (the same in both operands' tiles, both BM = BN rows of BK), its shared offset and
  // its offset in a row-major [rows][d] source. (Per tile, only the slice start p0 and the
  // centroid tile move; a division per tile and the address arithmetic per copy cost ~100
  // instructions a tile, more than the mma at d = 16.)
  static_assert(BM == BN, "the objects' and centroids' tiles share their copies' geometry");
  constexpr int PER_ROW = BK / VEC, COPIES = BM * BK / VEC / NT;
  static_assert(BM * BK % (VEC * NT) == 0, "stage loads must split evenly");
  int copy_row[COPIES], copy_col[COPIES];
#pragma unroll
  for (int q = 0; q < COPIES; ++q) {
    const int c = threadIdx.x + q * NT;
    copy_row[q] = c / PER_ROW;
    copy_col[q] = (c % PER_ROW) * VEC;
  }
  auto load = [&](int s, int dt, int ct, bool objects) {
    const int p0 = dt * BK;
    const T* cb = centred + static_cast<std::int64_t>(ct) * BNS * d;
    const int c_rows = k - ct * BNS;
#pragma unroll
    for (int q = 0; q < COPIES; ++q) {
      const int r = copy_row[q], p = p0 + copy_col[q];
      const int off = r * d + p;
      if (objects) {
        const bool in = r < rows_here && p < d;
        gemm::cp_async<VEC * int(sizeof(T))>(stage_a(s) + r * TA::stride + copy_col[q], in ? xb + off : xb, in);
      }
#pragma unroll
      for (int sub = 0; sub < CPS; ++sub) {
        const int rs = r + sub * BN;
        const bool in = rs < c_rows && p < d;
        gemm::cp_async<VEC * int(sizeof(T))>(stage_b(s) + rs * TB::stride + copy_col[q],
                                             in ? cb + off + sub * BN * d : cb, in);
      }
    }
    if constexpr (S::centre_objects && !PRE)
      if (threadIdx.x < BK / VEC) {
        const int p = p0 + threadIdx.x * VEC;
        gemm::cp_async<VEC * int(sizeof(T))>(stage_mu(s) + threadIdx.x * VEC, p < d ? mu + p : mu, p < d);
      }
    if (dt == dtiles - 1 && threadIdx.x < BNS)  // the keys, for the fold after the last slice (+inf past k)
      gemm::cp_async<int(sizeof(T))>(stage_key(s) + threadIdx.x, keyed + ct * BNS + threadIdx.x, true);
  };

  T acc[FM][FN][Mma::C];
  auto clear = [&] {
#pragma unroll
    for (int a = 0; a < FM; ++a)
#pragma unroll
      for (int b = 0; b < FN; ++b)
#pragma unroll
        for (int e = 0; e < Mma::C; ++e) acc[a][b][e] = T(0);
  };
  clear();
  // Double: each lane keeps a list for each of its ROWS rows. Float: lane l keeps the one list
  // of its warp's row l, fed through a 32 x 8 chunk of keys in shared memory.
  TopL<T, L> top[ROWS];
  TopL<T, L> own;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) top_clear(top[r]);
  top_clear(own);
  T* const chunk = smem + STAGES * STAGE + warp * 32 * 8;

  // The next tile to load (lt: its number; its stage, slice of d and centroid tile) and the
  // tile to compute, stepped without divisions.
  int lt = 0, ls = 0, ldt = 0, lct = 0;
  auto load_next = [&] {
    // With one slice of d (d <= BK) every tile needs the same objects' slice: once each stage
    // holds it, only the centroids move.
    if (lt < tiles) load(ls, ldt, lct, dtiles > 1 || lt < STAGES);
    gemm::cp_async_commit();
    ++lt;
    next_tile(ls, ldt, lct, STAGES, dtiles);
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_next();
  int cs = 0, cdt = 0, cct = 0;
  // Float from the centred copy (PRE) with one slice of d and several stages of centroids: each
  // row's threshold from its previous label q (margin.hpp: "A threshold before the walk", as the
  // wgmma kernel): k_q = keyed[q] - 2 x'.c'_q of the same TF32 operands summed in FP32 here, from
  // the objects' slice of the first stage. Keys at or above T never enter the lists, which start
  // full of T: a group of 8 keys then rarely has one below its list's last, where without it a
  // warp's 32 rows kept one of them inserting in a quarter of the groups at K = 65536.
  const bool thresholds = PRE && !S::is_double && prev != nullptr && dtiles == 1 && ctiles > 1;
  // With thresholds, float keeps lists where the accumulators are, as double does (a list for
  // each of the lane's rows, the quad's four merged at the end), not through the key chunk:
  // keys below the threshold are few, so the lanes' insertions are rare, and the chunk's stores,
  // loads and barriers were most of the fold (H100, float, 1,000,000 x 16, K = 65536: 35.3 -> 26.4 ms
  // per iteration; 500,000 x 10, K = 16384: 5.34 -> 4.12; plots/tensor_lists_ab_h100.txt).
  auto set_threshold = [&] {
    const int row = wm0 + lane;  // row l of the warp's 32, computed by lane l
    const int q = row < rows_here ? prev[row0 + row] : -1;
    float threshold = INFINITY;
    if (q >= 0 && q < k) {
      const T* c = centred + static_cast<std::int64_t>(q) * d;
      const T* xs = stage_a(0);
      float s = 0.f;
      for (int p = 0; p < d; ++p) s = __fmaf_rn(static_cast<float>(xs[TA::at(row, p)]), static_cast<float>(__ldg(c + p)), s);
      const double x2 = xc2[row0 + row], c2 = *cmax2;
      const double tq0 = static_cast<double>(keyed[q]) - 2.0 * static_cast<double>(s) +
                         3.0 * candidate_error(bound, x2, mu_norm, c2);
      threshold = __double2float_ru(tq0 + candidate_margin(bound, x2, mu_norm, c2, tq0));
    }
#pragma unroll
    for (int a = 0; a < FM; ++a)
#pragma unroll
      for (int h = 0; h < H; ++h) {  // the lane's row a M + gq + 8 h, from the lane that computed it
        const float t = __shfl_sync(0xffffffffu, threshold, a * Mma::M + gq + 8 * h);
#pragma unroll
        for (int e = 0; e < L; ++e) top[a * H + h].v[e] = t;  // index INT_MAX: top_clear's
      }
  };
  for (int t = 0; t < tiles; ++t) {
    gemm::cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_next();
    if (t == 0 && thresholds) set_threshold();  // the objects' slice is in stage 0

    const T* as = stage_a(cs);
    const T* ms = stage_mu(cs);
    // CPS > 1 only with one slice of d (float, d <= 16): each centroid tile of the stage is
    // multiplied and folded in turn.
#pragma unroll
    for (int sub = 0; sub < CPS; ++sub) {
      const int ctile = cct * CPS + sub;
      if (CPS > 1 && ctile * BN >= k) break;  // the last stage's tiles past K: nothing to multiply
      const T* bs = stage_b(cs) + sub * BN * TB::stride;
#pragma unroll
      for (int kk = 0; kk < BK; kk += Mma::K) {
        Reg af[FM][Mma::A], bf[FN][Mma::B];
        if constexpr (PRE) {
          // The objects already centred and rounded to TF32 (centred_row_norms): each 16 x 8
          // fragment is one ldmatrix.x4, lane l naming row (l & 7) + 8 ((l >> 3) & 1), column
          // 4 (l >> 4) of it -- the four 8 x 4 quarters in the fragment's register order.
          const int lr = (lane & 7) + 8 * ((lane >> 3) & 1), lc = kk + 4 * (lane >> 4);
#pragma unroll
          for (int a = 0; a < FM; ++a) ldmatrix_x4(af[a], as + TA::at(wm0 + a * Mma::M + lr, lc));
        } else {
#pragma unroll
        for (int a = 0; a < FM; ++a)
#pragma unroll
          for (int e = 0; e < Mma::A; ++e) {
            const int col = kk + tq + 4 * (e >> 1);
            const T v = as[TA::at(wm0 + a * Mma::M + gq + 8 * (e & 1), col)];
            if constexpr (S::centre_objects)
              af[a][e] = Mma::convert(v - ms[col]);
            else
              af[a][e] = object_operand<Mma>(v);
          }
        }
        if constexpr (S::is_double) {
#pragma unroll
          for (int b = 0; b < FN; ++b)
#pragma unroll
            for (int e = 0; e < Mma::B; ++e)
              bf[b][e] = Mma::convert(bs[TB::at(wn0 + b * Mma::N + gq, kk + tq + 4 * e)]);
        } else {
          // centre_centroids stored c' rounded to TF32: two 8-centroid fragments (two k
          // halves each) per ldmatrix.x4, lane l naming centroid l & 7 of fragment
          // 2q + (l >> 4), k half (l >> 3) & 1.
          static_assert(FN % 2 == 0 && Mma::B == 2, "B fragments are loaded in pairs");
          const int lr = lane & 7, lc = kk + 4 * ((lane >> 3) & 1);
#pragma unroll
          for (int q = 0; q < FN / 2; ++q) {
            unsigned r[4];
            ldmatrix_x4(r, bs + TB::at(wn0 + (2 * q + (lane >> 4)) * Mma::N + lr, lc));
            bf[2 * q][0] = r[0];
            bf[2 * q][1] = r[1];
            bf[2 * q + 1][0] = r[2];
            bf[2 * q + 1][1] = r[3];
          }
        }
        // A tile's first products start from zero (no registers to clear after each fold).
        if (kk == 0 && cdt == 0) {
#pragma unroll
          for (int a = 0; a < FM; ++a)
#pragma unroll
            for (int b = 0; b < FN; ++b) Mma::mma_zero(acc[a][b], af[a], bf[b]);
        } else {
#pragma unroll
          for (int a = 0; a < FM; ++a)
#pragma unroll
            for (int b = 0; b < FN; ++b) Mma::mma(acc[a][b], af[a], bf[b]);
        }
      }

      if (cdt == dtiles - 1) {  // this centroid tile is complete: fold it into the lists
        const int c0 = ctile * BN + wn0 + 2 * tq;
        const T* ks = stage_key(cs) + sub * BN + wn0 + 2 * tq;
        T nj[FN][2];  // past k: +inf (the keys' padding), a key no list takes
#pragma unroll
        for (int b = 0; b < FN; ++b)
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2) nj[b][e2] = ks[b * Mma::N + e2];
        if (!S::is_double && thresholds) {
#pragma unroll
          for (int a = 0; a < FM; ++a)
#pragma unroll
            for (int h = 0; h < H; ++h) {
              float v[2 * FN];
              int j[2 * FN];
#pragma unroll
              for (int b = 0; b < FN; ++b)
#pragma unroll
                for (int e2 = 0; e2 < 2; ++e2) {
                  v[2 * b + e2] = fused_mul_add(T(-2), acc[a][b][h * 2 + e2], nj[b][e2]);
                  j[2 * b + e2] = c0 + b * Mma::N + e2;
                }
              if constexpr (!S::is_double && 2 * FN == 8) push_keys8(top[a * H + h], v, j);
            }
        } else if constexpr (!S::is_double) {
          // The keys go to the row that owns them: per 8-centroid fragment b, every lane writes
          // its 4 rows x 2 keys into the warp's 32 x 8 chunk (16-byte halves swapped on every
          // other group of 4 rows, so the row reads below meet 8 different banks groups), then
          // lane l reads row l's 8 keys, takes their least (a min a key), and only if that beats
          // its list's last inserts them, in centroid order. One list per row and warp, not one
          // per row and lane: a quarter of the lists to fill, and a lane's insertions, which the
          // whole warp waits for, run over its own row only. (Each lane keeping lists of its 4
          // rows, tested row by row, spent about half the kernel's instructions inserting --
          // without thresholds; with them, above, the lane's own lists win.)
          const int jb = ctile * BN + wn0;
          const int sw = (lane >> 2) & 1;
#pragma unroll
          for (int b = 0; b < FN; ++b) {
            __syncwarp();  // the previous fragment's keys are read
#pragma unroll
            for (int a = 0; a < FM; ++a)
#pragma unroll
              for (int h = 0; h < H; ++h) {
                const int row = a * Mma::M + gq + 8 * h;
                // nj - 2 acc rounded once, as one fused multiply-add (2 acc is exact)
                const float2 kv = make_float2(fused_mul_add(T(-2), acc[a][b][h * 2], nj[b][0]),
                                              fused_mul_add(T(-2), acc[a][b][h * 2 + 1], nj[b][1]));
                *reinterpret_cast<float2*>(chunk + row * 8 + (((tq >> 1) ^ ((row >> 2) & 1)) * 4) + (2 * tq & 3)) = kv;
              }
            __syncwarp();
            const float4 lo = *reinterpret_cast<const float4*>(chunk + lane * 8 + sw * 4);
            const float4 hi = *reinterpret_cast<const float4*>(chunk + lane * 8 + (sw ^ 1) * 4);
            push_row8(own, lo, hi, jb + b * Mma::N);
          }
        } else {  // double: each key against its list (the row minimum first measured 7% slower at d = 128)
#pragma unroll
          for (int b = 0; b < FN; ++b)
#pragma unroll
            for (int e2 = 0; e2 < 2; ++e2)
#pragma unroll
              for (int a = 0; a < FM; ++a)
#pragma unroll
                for (int h = 0; h < H; ++h)
                  top_push_ascending(top[a * H + h], fused_mul_add(T(-2), acc[a][b][h * 2 + e2], nj[b][e2]),
                                     c0 + b * Mma::N + e2);
        }
      }
    }
    next_tile(cs, cdt, cct, STAGES, dtiles);
  }
  gemm::cp_async_wait<0>();

  TopL<T, L>* lists = reinterpret_cast<TopL<T, L>*>(fused_tensor_raw);
  if (S::is_double || thresholds) {
    // The four lanes of a quad hold the same rows: merge them.
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      top_merge(top[r], top_shfl_xor(top[r], 1));
      top_merge(top[r], top_shfl_xor(top[r], 2));
    }
    // Then the warps that share rows, through shared memory (the ring is no longer read).
    __syncthreads();
    if (tq == 0) {
#pragma unroll
      for (int a = 0; a < FM; ++a)
#pragma unroll
        for (int h = 0; h < H; ++h) lists[wn * BM + wm0 + a * Mma::M + gq + 8 * h] = top[a * H + h];
    }
  } else {
    static_assert(WM == 32, "float without thresholds: one row per lane");
    __syncthreads();
    lists[wn * BM + wm0 + lane] = own;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < rows_here; r += NT) {
    TopL<T, L> m = lists[r];
    for (int w = 1; w < S::warps_n; ++w) top_merge(m, lists[w * BM + r]);
    settle_object(m, row0 + r, bound, xc2, mu_norm, *cmax2, labels, queue, everyone, queued);
  }
}

// The re-checks compute seq's sums in seq's order: for each (object, centroid) pair the squared
// differences are rounded one at a time and added in coordinate order. That order is serial,
// but the loads are not: a warp reads 32 coordinates at a time, coalesced, and only the adds
// run in sequence. (One lane walking a row alone waited on memory at every coordinate: 100 us
// for 4,000 queued objects of d = 784 under ncu, H200.)

// One warp per queued object (grid-stride over the queue's length, read on the device), its
// candidates' sums kept by lanes 0..count-1: lane p rounds (x_p - c_p)^2 of each candidate
// into shared memory, then lane m adds candidate m's squares in coordinate order. (Shuffling
// the squares to every lane took 3 x 2 instructions a coordinate; a shared read and an add
// serve all the candidates' lanes at once.) The queued-against-everyone objects' slots are
// prepared here as well (recheck_all's minimum cleared, their label set to INT_MAX for the
// label pass's atomicMin).
// A: the arithmetic (T: seq's; double on float data: k-means||'s distance, kmeanspp.cu).
constexpr int kNearestGroup = 4, kNearestThreads = 256;
template <class T, class A = T>
__global__ void __launch_bounds__(kNearestThreads)
    recheck_nearest(const T* __restrict__ x, const T* __restrict__ centroids, int d,
                    const Recheck* __restrict__ queue, const unsigned long long* __restrict__ queued,
                    const std::int64_t* __restrict__ everyone, unsigned long long* __restrict__ all_min,
                    std::int32_t* __restrict__ labels) {
  constexpr int SPAN = 32 * kNearestGroup;
  __shared__ A squares[kNearestThreads / 32][kMaxCandidates][SPAN + 1];  // +1: the lanes' rows in other banks
  const int lane = threadIdx.x & 31, wb = threadIdx.x / 32;
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t q = thread; q < static_cast<std::int64_t>(queued[1]); q += threads) {
    all_min[q] = ~0ull;
    labels[everyone[q]] = INT_MAX;
  }
  const std::int64_t warps = threads / 32;
  const std::int64_t total = static_cast<std::int64_t>(*queued);
  for (std::int64_t w = thread / 32; w < total; w += warps) {
    const Recheck r = queue[w];
    const T* xi = x + r.i * d;
    const T* cand[kMaxCandidates];
#pragma unroll
    for (int m = 0; m < kMaxCandidates; ++m)
      cand[m] = centroids + static_cast<std::int64_t>(r.c[m < r.count ? m : 0]) * d;
    A mine = 0;  // lane m < count: candidate m's running sum
    // kNearestGroup chunks of 32 coordinates loaded together: one wait on memory per group.
    for (int p0 = 0; p0 < d; p0 += SPAN) {
      A sq[kNearestGroup][kMaxCandidates];
#pragma unroll
      for (int g = 0; g < kNearestGroup; ++g) {
        const int p = p0 + 32 * g + lane;
        const A xv = p < d ? static_cast<A>(xi[p]) : A(0);
#pragma unroll
        for (int m = 0; m < kMaxCandidates; ++m)
          sq[g][m] = m < r.count && p < d ? seq_square(xv, static_cast<A>(cand[m][p])) : A(0);
      }
      __syncwarp();  // the previous group's squares are used up
#pragma unroll
      for (int g = 0; g < kNearestGroup; ++g)
#pragma unroll
        for (int m = 0; m < kMaxCandidates; ++m) squares[wb][m][32 * g + lane] = sq[g][m];
      __syncwarp();
      // Unrolled, so the shared reads run ahead of the adds. Past d the squares are +0, and
      // s + 0 is s exactly: no bound on the coordinates.
      if (lane < r.count)
#pragma unroll
        for (int c = 0; c < SPAN; ++c) mine = seq_plus(mine, squares[wb][lane][c]);
    }
    A best = A(INFINITY);
    int best_c = INT_MAX;
#pragma unroll
    for (int m = 0; m < kMaxCandidates; ++m) {
      const A v = __shfl_sync(0xffffffffu, mine, m);
      if (m < r.count && (v < best || (v == best && r.c[m] < best_c))) {
        best = v;
        best_c = r.c[m];
      }
    }
    if (lane == 0) labels[r.i] = best_c;
  }
}

// The objects queued against every centroid, over (object, slice of 32 centroids) pairs, a
// warp each. Double, in two passes: the least sum over all centroids (atomicMin of the sum's
// bits: for non-negative IEEE values the bit patterns order as the values), then (LABEL) the same
// sums again, the lowest centroid whose sum equals it (atomicMin of the index). Float, in one:
// the sum's 32 bits and the index share a word, so one atomicMin finds both (the second pass was
// half of recheck_all's time), and recheck_all_labels copies the index out. (A, the arithmetic:
// float data summed in double, as k-means||'s rounds do, takes double's two passes.) The slices
// spread one object's K centroids over many warps,
// so a few queued objects no longer wait on one block walking all of K. A warp stages its 32
// centroids' next 32 coordinates in shared memory (32 coalesced loads in flight), then lane
// l adds centroid l's squared differences in coordinate order.
constexpr int kAllWarps = 4;
template <class T, bool LABEL, class A = T>
__global__ void __launch_bounds__(kAllWarps * 32)
    recheck_all(const T* __restrict__ x, const T* __restrict__ centroids, int d, int k,
                const std::int64_t* __restrict__ everyone, const unsigned long long* __restrict__ count,
                unsigned long long* __restrict__ all_min, std::int32_t* __restrict__ labels) {
  // G chunks of 32 coordinates staged at a time, their 32 x G loads a lane issued together.
  constexpr int G = sizeof(T) == 4 ? 2 : 1;
  __shared__ T cs[kAllWarps][G][32][33];
  __shared__ T xs[kAllWarps][G][32];
  const int lane = threadIdx.x & 31, wb = threadIdx.x / 32;
  const std::int64_t slices = (k + 31) / 32;
  const std::int64_t items = static_cast<std::int64_t>(*count) * slices;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kAllWarps;
  for (std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * kAllWarps + wb; item < items; item += warps) {
    const std::int64_t q = item / slices;
    const int c0 = static_cast<int>(item % slices) * 32;
    const std::int64_t i = everyone[q];
    const int rows = k - c0 < 32 ? k - c0 : 32;
    A sum = 0;
    for (int p0 = 0; p0 < d; p0 += 32 * G) {
      T cv[G][32], xv[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int p = p0 + 32 * g + lane;
        xv[g] = p < d ? x[i * d + p] : T(0);
#pragma unroll
        for (int r = 0; r < 32; ++r)
          cv[g][r] = r < rows && p < d ? centroids[static_cast<std::int64_t>(c0 + r) * d + p] : T(0);
      }
      __syncwarp();  // the previous chunks are used up
#pragma unroll
      for (int g = 0; g < G; ++g) {
        xs[wb][g][lane] = xv[g];
#pragma unroll
        for (int r = 0; r < 32; ++r) cs[wb][g][r][lane] = cv[g][r];
      }
      __syncwarp();
      // Unrolled (the shared loads run ahead of the adds); past d both values are 0 and
      // adding (0 - 0)^2 leaves the sum as it is.
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int p = 0; p < 32; ++p)
          sum = seq_add(sum, static_cast<A>(xs[wb][g][p]), static_cast<A>(cs[wb][g][lane][p]));
    }
    // The slice's least sum (lowest centroid on equal sums), across the lanes.
    A best = lane < rows ? sum : A(INFINITY);
    int best_c = lane < rows ? c0 + lane : INT_MAX;
    for (int off = 16; off > 0; off /= 2) {
      const A ov = __shfl_xor_sync(0xffffffffu, best, off);
      const int oc = __shfl_xor_sync(0xffffffffu, best_c, off);
      if (ov < best || (ov == best && oc < best_c)) {
        best = ov;
        best_c = oc;
      }
    }
    if (lane == 0) {
      if constexpr (sizeof(A) == 4) {  // one pass: the sum's bits above the centroid's index
        static_assert(!LABEL, "float needs no label pass: recheck_all_labels reads the low word");
        atomicMin(all_min + q, (static_cast<unsigned long long>(__float_as_uint(best)) << 32) |
                                   static_cast<unsigned>(best_c));
      } else {
        const auto bits = static_cast<unsigned long long>(__double_as_longlong(best));
        if constexpr (!LABEL)
          atomicMin(all_min + q, bits);
        else if (bits == all_min[q])
          atomicMin(labels + i, best_c);
      }
    }
  }
}

// Float's recheck_all leaves each queued object's least (sum, centroid) in one word, the sum's
// bits above the index (a non-negative float's bits order as its value; equal sums then order by
// index): the label is the low half. (Double's sum takes the whole word, hence its second pass.)
static __global__ void __launch_bounds__(256)
    recheck_all_labels(const std::int64_t* __restrict__ everyone, const unsigned long long* __restrict__ count,
                       const unsigned long long* __restrict__ all_min, std::int32_t* __restrict__ labels) {
  const std::int64_t total = static_cast<std::int64_t>(*count);
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < total;
       q += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    labels[everyone[q]] = static_cast<std::int32_t>(all_min[q] & 0xffffffffull);
}

// The accumulation by cluster. relabel_for_sort: labels <- next, the change count (unless
// null: the final E-step), and the objects' indices for CUB's radix sort by label. accumulate_sorted then walks the sorted
// order in fixed chunks of kSortedChunk positions: thread j adds coordinate j of each object
// (one row read coalesced by the block) into a running 64-bit fixed-point sum and flushes it
// with one global atomic whenever the cluster changes: about K*d + d atomics per chunk instead
// of d per object, and no shared-memory contention when few clusters take many objects. The
// sums are integers, so they are the same bits in any order and as the per-object atomics.
constexpr int kSortedChunk = 256, kSortedUnroll = 8;

static __global__ void relabel_for_sort(const std::int32_t* __restrict__ next, std::int32_t* __restrict__ labels,
                                 std::int64_t n, unsigned long long* changed, std::int64_t* __restrict__ index) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    const int c = next[i];
    moved = labels[i] != c;
    labels[i] = c;
    index[i] = i;
  }
  count_changed(changed, moved);
}

// With Q (the movers' scheme, below), also each cluster's q sum (the members' object_q, summed
// by the thread of coordinate 0 beside the count) into q_sums.
template <class T, int U = kSortedUnroll, bool Q = false>
__global__ void __launch_bounds__(1024)
    accumulate_sorted(const T* __restrict__ x, const T* __restrict__ centroids,
                      const std::int32_t* __restrict__ sorted_labels, const std::int64_t* __restrict__ sorted_index,
                      std::int64_t n, int d, int chunk, unsigned long long* __restrict__ sums,
                      unsigned long long* __restrict__ counts, double scale, unsigned long long* inertia,
                      double inertia_scale, const unsigned long long* __restrict__ object_q = nullptr,
                      unsigned long long* __restrict__ q_sums = nullptr) {
  __shared__ std::int32_t labels_s[kSortedChunk];
  __shared__ std::int64_t index_s[kSortedChunk];
  __shared__ unsigned long long q_s[Q ? kSortedChunk : 1];
  unsigned long long part = 0;  // the inertia, fixed point: one addend per object and coordinate
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  for (std::int64_t ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
    const std::int64_t begin = ch * chunk;
    const int size = static_cast<int>(n - begin < chunk ? n - begin : chunk);
    __syncthreads();  // the previous chunk's entries are used up
    for (int q = threadIdx.x; q < size; q += blockDim.x) {  // the chunk's labels and rows' offsets, coalesced
      labels_s[q] = sorted_labels[begin + q];
      const std::int64_t i = sorted_index[begin + q];
      index_s[q] = i * d;
      if (Q) q_s[q] = object_q[i];
    }
    __syncthreads();
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
      unsigned long long acc = 0, qacc = 0;
      int label = labels_s[0], run = 0;  // the cluster's members in the chunk: from position run on
      // The centroid's coordinate changes only with the cluster, which the sorted chunk
      // changes a few times: one register, reloaded then, not a load per object.
      double cj = static_cast<double>(centroids[static_cast<std::int64_t>(label) * d + j]);
      // U objects' loads issued before any is used (one at a time left the loop waiting on
      // memory: 200 us for 60,000 x 784 under ncu, ~2x the read's time; 4 at a time 162 us, 8
      // at a time 144 us, H200).
      for (int q0 = 0; q0 < size; q0 += U) {
        T v[U];
        int cl[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int q = q0 + u < size ? q0 + u : size - 1;
          cl[u] = labels_s[q];
          v[u] = x[index_s[q] + j];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (q0 + u >= size) break;
          if (cl[u] != label) {
            atomicAdd(&sums[static_cast<std::int64_t>(label) * d + j], acc);
            if (j == 0) {
              atomicAdd(&counts[label], static_cast<unsigned long long>(q0 + u - run));
              if (Q) atomicAdd(&q_sums[label], qacc);
            }
            acc = qacc = 0;
            run = q0 + u;
            label = cl[u];
            cj = static_cast<double>(centroids[static_cast<std::int64_t>(label) * d + j]);
          }
          const double diff = static_cast<double>(v[u]) - cj;
          part += to_fixed(diff * diff, inertia_scale);
          acc += to_fixed(static_cast<double>(v[u]), scale);
          if (Q && j == 0) qacc += q_s[q0 + u];
        }
      }
      atomicAdd(&sums[static_cast<std::int64_t>(label) * d + j], acc);
      if (j == 0) {
        atomicAdd(&counts[label], static_cast<unsigned long long>(size - run));
        if (Q) atomicAdd(&q_sums[label], qacc);
      }
    }
  }
  flush_block_fixed(inertia, part);
}

// The movers' scheme (in memory, on one GPU, once few objects move): the sums, counts and q
// sums are kept across iterations (they are integers: the same bits as summed afresh), and
// only the objects whose label changed go through them. move_members: a warp takes 32
// objects; each mover's row is read by the whole warp, a coordinate per lane, its fixed-point
// addends added to the new cluster's sums and taken from the old one's (coalesced 64-bit
// global atomics), its q (object_q) moved the same way; the labels written, the movers
// counted. Rows of objects that stay are not read.
template <class T>
__global__ void __launch_bounds__(256)
    move_members(const T* __restrict__ x, const std::int32_t* __restrict__ next, std::int32_t* __restrict__ labels,
                 std::int64_t n, int d, unsigned long long* sums, unsigned long long* counts, double scale,
                 const unsigned long long* __restrict__ object_q, unsigned long long* q_sums,
                 unsigned long long* changed) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  unsigned moves = 0;
  for (std::int64_t base = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * 32; base < n;
       base += warps * 32) {
    const std::int64_t i = base + lane;
    int to = 0, from = 0;
    if (i < n) {
      to = next[i];
      from = labels[i];
    }
    const bool moved = i < n && to != from;
    if (moved) labels[i] = to;
    unsigned movers = __ballot_sync(0xffffffffu, moved);
    moves += moved;
    while (movers) {
      const int m = __ffs(movers) - 1;
      movers &= movers - 1;
      const std::int64_t row = (base + m) * d;
      const int into = __shfl_sync(0xffffffffu, to, m), out_of = __shfl_sync(0xffffffffu, from, m);
      for (int j = lane; j < d; j += 32) {
        const unsigned long long a = to_fixed(static_cast<double>(x[row + j]), scale);
        atomicAdd(&sums[static_cast<std::int64_t>(into) * d + j], a);
        atomicAdd(&sums[static_cast<std::int64_t>(out_of) * d + j], 0ull - a);
      }
      if (lane == 0) {
        const unsigned long long q = object_q[base + m];
        atomicAdd(&q_sums[into], q);
        atomicAdd(&q_sums[out_of], 0ull - q);
        atomicAdd(&counts[into], 1ull);
        atomicAdd(&counts[out_of], ~0ull);
      }
    }
  }
  flush_block_count(changed, moves);
}

// The iteration's inertia from the kept sums (update.cuh: algebraic_part): movers_parts, a
// warp per cluster, writes each cluster's part and error bound into parts [2k];
// movers_inertia (one block) totals them in fixed_order_total's order: *inertia = the
// fixed-point total, or kInertiaUnsure with the centroids ([k][d], those of the assignment)
// copied to `previous` for the host's per-object sum.
template <class T>
__global__ void movers_parts(const T* __restrict__ centroids, const unsigned long long* sums,
                             const unsigned long long* counts, const unsigned long long* q_sums,
                             const double* __restrict__ z, int k, int d, double inv_scale, double inertia_scale,
                             double* __restrict__ parts) {
  const int lane = threadIdx.x & 31;
  const int c = static_cast<int>((static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  if (c >= k) return;  // whole warps
  const double count = static_cast<double>(static_cast<long long>(__ldcg(&counts[c])));
  const T* row = centroids + static_cast<std::int64_t>(c) * d;
  double part, size;
  algebraic_part(sums + static_cast<std::int64_t>(c) * d, count, [&](int j) { return row[j]; }, z, d, lane, inv_scale,
                 part, size);
  for (int off = 16; off > 0; off /= 2) {
    part += __shfl_down_sync(0xffffffffu, part, off);
    size += __shfl_down_sync(0xffffffffu, size, off);
  }
  if (lane == 0) {
    const double q = static_cast<double>(static_cast<long long>(__ldcg(&q_sums[c]))) / inertia_scale;
    parts[c] = q + part;
    parts[k + c] = (2 * d + 24) * 0x1p-53 * (fabs(q) + size);
  }
}

template <class T>
__global__ void __launch_bounds__(1024)
    movers_inertia(const T* __restrict__ centroids, int k, int d, double inertia_scale, double guard,
                   const double* __restrict__ parts, unsigned long long* inertia, T* __restrict__ previous) {
  __shared__ double warp_totals[32];
  __shared__ bool unsure;
  const double total = fixed_order_total(parts, k, warp_totals);
  __syncthreads();
  const double bound = fixed_order_total(parts + k, k, warp_totals);
  if (threadIdx.x == 0) {
    const unsigned long long fixed = algebraic_inertia_fixed(total, bound, k, guard, inertia_scale);
    *inertia = fixed;
    unsure = fixed == kInertiaUnsure;
  }
  __syncthreads();
  if (unsure)
    for (std::int64_t t = threadIdx.x; t < static_cast<std::int64_t>(k) * d; t += blockDim.x) previous[t] = centroids[t];
}

// |x - mu|^2 of every object (row-major [n][d]), in double: one warp per object. With
// `rounded`, of x' = x - mu rounded in T, as the assignment kernel forms it. With `operand`
// (O = float), also x' rounded on to TF32 (cvt.rna of x' in float), the TF32 assignment's A
// operand exactly as it would form it from x and mu, for its ldmatrix loads: float objects
// (O = T), or double ones scored on TF32 candidates (margin.hpp: tf32_candidates_bound).
// With object_q (the movers' scheme), also each object's q = sum of to_fixed((x_j - z_j)^2)
// at the inertia's scale (integers: the same bits in any order).
template <class T, class O = T>
__global__ void centred_row_norms(const T* __restrict__ x, const T* __restrict__ mu, std::int64_t n, int d,
                                  bool rounded, double* __restrict__ out, O* __restrict__ operand,
                                  const double* __restrict__ z = nullptr, double inertia_scale = 0,
                                  unsigned long long* __restrict__ object_q = nullptr) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < n; i += warps) {
    double s = 0;
    unsigned long long q = 0;
    for (int p = lane; p < d; p += 32) {
      if (object_q) {
        const double e = static_cast<double>(x[i * d + p]) - z[p];
        q += to_fixed(e * e, inertia_scale);
      }
      const T xr = x[i * d + p] - mu[p];
      const double v =
          rounded ? static_cast<double>(xr) : static_cast<double>(x[i * d + p]) - static_cast<double>(mu[p]);
      s += v * v;
      if constexpr (sizeof(O) == 4)
        if (operand) {
          unsigned r;
          asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(static_cast<float>(xr)));
          operand[i * d + p] = __uint_as_float(r);
        }
    }
    for (int off = 16; off > 0; off /= 2) {
      s += __shfl_down_sync(0xffffffffu, s, off);
      q += __shfl_down_sync(0xffffffffu, q, off);
    }
    if (lane == 0 && object_q) object_q[i] = q;
    if (lane == 0) out[i] = s;
  }
}

// c' = c - mu (rounded in T; with O = float stored rounded on to TF32, the mma's operand) of
// every centroid, its key term |c'|^2 + 2 mu.c' (or |c'|^2) summed in T and stored in O, and the
// largest |c'|^2 in double into *cmax2 (cleared by the caller): one warp per centroid. O = T,
// or double centroids for TF32 candidates (O = float). The maximum of non-negative doubles is
// the maximum of their bit patterns: one integer atomicMax.
template <class T, class O = T>
__global__ void centre_centroids(const T* __restrict__ centroids, const T* __restrict__ mu, int k, int d,
                                 bool with_mu_term, O* __restrict__ centred, O* __restrict__ keyed, double* cmax2) {
  const int warp = static_cast<int>((static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (warp >= k) return;
  const std::int64_t at = static_cast<std::int64_t>(warp) * d;
  T s = 0, m = 0;
  double sd = 0;
  for (int p = lane; p < d; p += 32) {
    const T v = centroids[at + p] - mu[p];
    if constexpr (sizeof(O) == 4) {  // the TF32 operand, rounded once here (cvt.rna), not per warp and tile
      unsigned r;
      asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(static_cast<float>(v)));
      centred[at + p] = __uint_as_float(r);
    } else {
      centred[at + p] = v;
    }
    s += v * v;
    m += mu[p] * v;
    sd += static_cast<double>(v) * static_cast<double>(v);
  }
  for (int off = 16; off > 0; off /= 2) {
    s += __shfl_down_sync(0xffffffffu, s, off);
    m += __shfl_down_sync(0xffffffffu, m, off);
    sd += __shfl_down_sync(0xffffffffu, sd, off);
  }
  if (lane == 0) {
    keyed[warp] = static_cast<O>(with_mu_term ? s + 2 * m : s);
    // Bound the rounding of sd itself (relative d * 2^-53) so the maximum is an upper bound.
    const double up = sd * (1 + (d + 2) * 1.2e-16);
    atomicMax(reinterpret_cast<unsigned long long*>(cmax2), static_cast<unsigned long long>(__double_as_longlong(up)));
  }
}

}  // namespace km::kernels
