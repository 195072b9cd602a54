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
//                        The re-checks, the accumulation and the centred operands are in
//                        tensor/ (below); this header includes them, so the engine
//                        (src/kmeans/gpu/fused/tensor.cu) and k-means||'s rounds
//                        (src/kmeans/gpu/tensor_nearest.cu) include this one.
//   tensor/recheck.cuh   recheck_nearest (a warp per queued object: seq's direct formula, in
//                        seq's order and rounding, over the queued candidates; the lowest index
//                        wins ties), recheck_all (the same against every centroid: a warp per
//                        (object, 32 centroids), the least sum by atomicMin, then the lowest
//                        centroid that has it) and recheck_all_labels.
//   tensor/accumulate.cuh
//                        accumulate_sorted (the objects sorted by label, CUB radix sort, then
//                        summed in fixed chunks of the sorted order: the fixed-point sums and
//                        counts, update.cuh: to_fixed; integer atomics, the same bits in any
//                        order; and the inertia), and the movers' scheme (move_members,
//                        movers_parts, movers_inertia).
//   tensor/centre.cuh    centred_row_norms and centre_centroids: the operands centred on mu.
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
  // fold latencies at <= 128 registers. 8 warps of 64 measured 1-19% slower in double (H200),
  // and in float 4-20% slower on four real-data rows, 2-4% faster at d = 784 (one warp shape
  // kept).
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
  // with two, 43.0 with four).
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
  // per iteration; 500,000 x 10, K = 16384: 5.34 -> 4.12).
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

}  // namespace km::kernels

// The path's other kernels, after the assignment kernel (the order they had in one header, so
// the translation units that include this one compile to the same code).
#include "kernels/kmeans/tensor/recheck.cuh"
#include "kernels/kmeans/tensor/accumulate.cuh"
#include "kernels/kmeans/tensor/centre.cuh"
