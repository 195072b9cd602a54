// Step 6, fused, its tensor path on Hopper's warpgroup MMA (wgmma, sm_90a): float with
// 32 < d <= 128, d a multiple of 4, objects read from the centred TF32 copy (the shapes of
// embeddings: 262144 x 128, K = 1024 and the like) -- or from a centred float16 copy scaled by
// a power of two (rows padded to whole 16-byte chunks), on float16 tensor cores (WgmmaF16 below; margin.hpp:
// f16_candidates_bound): half the bytes of the copy and twice the products' rate, the same
// keys' contract.
//
//   fused_wgmma_assign  The same contract as fused_tensor_assign (6_fused_tensor.cuh) -- the
//                       same operands x' and c' (TF32), the same keys fl(keyed - 2 x'.c'), the
//                       same lists, margin and re-check queues, so seq's labels exactly -- with
//                       the products on wgmma instead of mma.sync:
//     - A block of 4 warpgroups takes 256 objects and keeps them, whole d, in shared memory for
//       its whole walk over the centroids (the objects are read from memory once per block, not
//       once per centroid tile).
//     - The centroids stream through a 4-stage ring in slices of 128 centroids x 32 coordinates
//       (one 128-byte swizzle atom a row): each stage one bulk copy (cp.async.bulk, issued by one
//       thread) from the centroids' tile image, which wgmma_image lays out once per iteration
//       already swizzled, counted on the stage's mbarrier. No block barrier per slice: a warp
//       waits only for the stage it reads, and the last warp done with a stage refills it.
//     - Each warpgroup multiplies its 64 objects by the slice with 4 wgmma.m64n128k8 (TF32),
//       both operands read by the tensor cores straight from shared memory through matrix
//       descriptors. mma.sync brings every fragment through registers with ldmatrix; at
//       d = 128 that shared-memory traffic, not the tensor cores, sets fused_tensor_assign's
//       pace (ncu).
//     - After a tile's last slice the 64 accumulators a thread holds (m64n128's layout is
//       mma.sync's m16n8 one, repeated: rows gq and gq + 8, columns 2 tq and 2 tq + 1 of every
//       8) become keys and are folded where they are, into the thread's two lists of 4 (one a
//       row, push_keys8); the row's four lanes merge theirs at the end.
// Measured against a version with cp.async by every thread and a block barrier a slice, and keys
// through shared memory to a lane per row and column half (H100, same call, fused float per
// iteration): 4194304 x 128, K = 1024 8.27 -> 6.57 ms;
// 262144 x 96, K = 4096 1.43 -> 1.03 ms; ncu: the folds' shared-memory round trip had made
// L1 the busiest unit (74% of peak, the tensor pipe at 35%).
// The products' error is charged as for mma.sync (margin.hpp: the operands' rounding to
// TF32, 2 u_acc per addition in any order), so the bound and the exactness argument are the
// same; the re-checks are 6_fused_tensor.cuh's kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_fp16.h>

#include "kernels/gemm/common.cuh"
#include "kernels/kmeans/candidate_lists.cuh"

namespace km::kernels {

// A block of WG warpgroups, 64 objects each, walks the centroids in tiles of BN (an m64nBN
// accumulator of BN / 2 floats a thread); MIN_BLOCKS of them share an SM. The shape built is
// 4 x 128, one block an SM. Smaller blocks, two or three an SM so that one block's fold could run
// beside another's products (2 x 64 and 1 x 64), were 12-18% and 18-31% slower on every measured
// shape (H100, same call): each m64n64 product reads as many
// object bytes from shared memory for half the work, and each block streams every centroid.
template <int WG_, int BN_, int MIN_BLOCKS_, class Op_>
struct WgmmaShape {
  using Op = Op_;
  using E = typename Op::E;             // an operand's storage: a TF32 float or a float16's bits
  static constexpr int WG = WG_;        // warpgroups a block, 64 objects each
  static constexpr int BM = 64 * WG;    // objects a block
  static constexpr int BN = BN_;        // centroids a tile: an m64nBN accumulator per warpgroup
  static constexpr int ACC = BN / 2;    // its floats a thread
  static_assert(kKeyPad % BN == 0, "a tile's keys lie within the padded keys");
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int CE = 16 / int(sizeof(E));  // coordinates a 16-byte chunk
  static constexpr int BK = 8 * CE;     // coordinates a slice: 128 bytes, one swizzle atom
  static constexpr int STAGES = 4;      // the centroids' ring (5 measured 3-6% slower)
  static constexpr int MAX_D = 128;     // the objects' tile, whole d, stays in shared memory
  static constexpr int threads = WG * 128;
  static constexpr int L = 4;
  static constexpr std::size_t a_bytes = std::size_t(BM) * MAX_D * sizeof(E);
  static constexpr std::size_t b_bytes = std::size_t(BN) * BK * sizeof(E);
  // + 1024: the swizzled tiles start on a 1024-byte boundary, found inside the block's window
  static constexpr std::size_t smem = 1024 + a_bytes + STAGES * b_bytes;
  static_assert(BN == 128, "the m64nBN instruction written below");
  static_assert(BK / Op::K == 4, "four instructions a slice, each 32 bytes further along the atom");
  static_assert((BM & (BM - 1)) == 0, "the objects' copy-in splits its index by shifts");
};

// The two operand formats of float's centred objects and centroids (margin.hpp): Tf32, the
// TF32 copy and centroids (wgmma k8, keys keyed - 2 acc); F16, both scaled by powers of two and
// rounded to float16 (wgmma k16, keys keyed - 2^(1 - ex - ec) acc; f16_candidates_bound), the
// same fold and lists.
struct WgmmaTf32 {
  using E = float;
  static constexpr int K = 8;
  static constexpr bool scaled = false;
};
struct WgmmaF16 {
  using E = unsigned short;  // a float16's bits
  static constexpr int K = 16;
  static constexpr bool scaled = true;
};
template <class Op>
using WgmmaAssignShape = WgmmaShape<4, 128, 1, Op>;


#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// A wgmma matrix descriptor for a K-major tile in 128-byte swizzle atoms (8 rows x 128 bytes,
// 1024-byte aligned): start address / 16 (14 bits), the leading offset unused (1), stride
// between 8-row groups 1024 bytes, swizzle mode 1 (128 bytes). descriptor_low gives the low
// word; stepping k by 8 TF32 adds 32 bytes to the start, 2 to the low word (within an atom:
// no carry), and the hardware applies the XOR swizzle to the address it forms.
__device__ __forceinline__ unsigned descriptor_low(unsigned address) { return ((address >> 4) & 0x3FFF) | (1u << 16); }
__device__ __forceinline__ std::uint64_t sw128_descriptor(unsigned low) {
  return (std::uint64_t{1024 >> 4} << 32) | (std::uint64_t{1} << 62) | low;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Writes by the generic proxy (cp.async) made visible to the async proxy (wgmma's operand reads).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// After wgmma_wait: the accumulators are read only from here on (the compiler may not hoist
// their reads above the wait, which does not name them).
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The stages' mbarriers (one arrival: the thread that issues the copy, plus the copy's bytes).
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
}
// The initialised barriers made visible to the async proxy (the bulk copies complete on them).
__device__ __forceinline__ void mbarrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}
__device__ __forceinline__ void mbarrier_expect_bytes(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}
// Spins until the barrier's phase of this parity has completed (its copies landed, visible).
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
// One bulk copy (the copy engine, not the threads) of `bytes` (a multiple of 16, both ends
// 16-byte aligned) from global to shared memory, counted on `bar` when it lands.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}

// d (+)= A.B^T for a 64 x 8 slice of objects and a 128 x 8 slice of centroids, TF32 in, FP32
// out; accumulate = 0 overwrites d.
__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                                     int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// The same for a 64 x 16 slice of float16 objects and a 128 x 16 slice of float16 centroids
// (both K-major: no transposes), FP32 out.
__device__ __forceinline__ void wgmma_m64n128k16_f16(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                                     int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// One slice's product of an operand format (4 instructions, 32 bytes apart in the atoms).
template <class Op>
__device__ __forceinline__ void wgmma_slice(float (&d)[64], unsigned a_low, unsigned b_low, bool accumulate_first) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if constexpr (Op::K == 8)
      wgmma_m64n128k8_tf32(d, sw128_descriptor(a_low + 2 * kk), sw128_descriptor(b_low + 2 * kk), accumulate_first || kk > 0);
    else
      wgmma_m64n128k16_f16(d, sw128_descriptor(a_low + 2 * kk), sw128_descriptor(b_low + 2 * kk), accumulate_first || kk > 0);
  }
}
#endif

// The centroids' tile image the assignment copies its stages from: for tile ct (BN centroids)
// and slice dt (BK coordinates), in that order, the BN x BK operands exactly as the stage holds
// them (row r's 16-byte chunk c8 at chunk c8 ^ (r % 8), the 128-byte swizzle), zeros past k and
// d: ceil(k / BN) * BN rows of ceil(d / BK) * BK. From centred, row-major [k][d] (d a multiple
// of 4); one thread a 16-byte chunk of the image, written in order. F16: each coordinate scaled
// by 2^e (f16_scale_exponent of *cmax2) and rounded to float16, and centred overwritten with the
// rounded value unscaled (exact), the operand the thresholds read; a chunk's 8 coordinates may
// end 4 past d (d % 8 = 4), those zeros.
template <class S>
__global__ void wgmma_image_kernel(float* __restrict__ centred, int k, int d, const double* __restrict__ cmax2,
                                   uint4* __restrict__ image) {
  constexpr int BN = S::BN, BK = S::BK, CE = S::CE;
  const int dtiles = (d + BK - 1) / BK;
  const std::int64_t chunks = static_cast<std::int64_t>((k + BN - 1) / BN) * BN * dtiles * (BK / CE);
  [[maybe_unused]] float up = 1.f, down = 1.f;
  if constexpr (S::Op::scaled) {
    const int e = f16_scale_exponent(sqrt(*cmax2));
    up = ldexpf(1.f, e);
    down = ldexpf(1.f, -e);
  }
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < chunks;
       q += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t slice = q / (BN * BK / CE);
    const int r = static_cast<int>(q / (BK / CE) % BN), c8 = static_cast<int>(q % (BK / CE)) ^ (r & 7);
    const int ct = static_cast<int>(slice / dtiles), dt = static_cast<int>(slice % dtiles);
    const int j = ct * BN + r, p = dt * BK + CE * c8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (j < k && p < d) {
      float* c = centred + static_cast<std::int64_t>(j) * d + p;
      if constexpr (S::Op::scaled) {
        unsigned short h[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const __half r16 = __float2half_rn(p + u < d ? c[u] * up : 0.f);  // exact scaling, one rounding
          h[u] = __half_as_ushort(r16);
          if (p + u < d) c[u] = __half2float(r16) * down;
        }
        v = make_uint4(h[0] | (unsigned{h[1]} << 16), h[2] | (unsigned{h[3]} << 16), h[4] | (unsigned{h[5]} << 16),
                       h[6] | (unsigned{h[7]} << 16));
      } else {
        v = *reinterpret_cast<const uint4*>(c);
      }
    }
    image[q] = v;
  }
}

// x: the centred TF32 copy (Tf32) or the objects as float16 (F16), row-major [n][ld] with ld = d
// rounded up to a whole 16-byte chunk (d for TF32; F16 rows of d % 8 = 4 end in 4 zeros:
// centre.cuh, float16_row_stride); image: the
// centroids' tile image (above), centred: the same centroids row-major as floats (the
// thresholds' reads); prev: the labels of the previous
// iteration (any value outside [0, k): no threshold); the other arguments as
// fused_tensor_assign's. Launch: WgmmaAssignShape::threads threads, smem bytes.
// CEILING (k-means||'s rounds): prev is not read; each row's lists start at the lower of T_h from
// ceiling[i] (margin.hpp: "A ceiling") and the first tile's least key plus its margin, and a row
// none of whose keys falls below T_h gets label -1 (settle_object): labels[i] is then the first nearest centroid by the re-check's formula
// wherever that centroid's distance is below ceiling[i], and -1 or some centroid elsewhere.
template <class S, bool CEILING = false>
__global__ void __launch_bounds__(S::threads, S::MIN_BLOCKS)
    fused_wgmma_assign(const void* __restrict__ x_in, const void* __restrict__ image_in, const float* __restrict__ centred,
                       const float* __restrict__ keyed, const double* __restrict__ cmax2,
                       const double* __restrict__ xc2, double mu_norm, std::int64_t n, int d, int k,
                       CandidateBound bound, std::int32_t* __restrict__ labels, Recheck* __restrict__ queue,
                       std::int64_t* __restrict__ everyone, unsigned long long* __restrict__ queued,
                       const std::int32_t* __restrict__ prev, const double* __restrict__ ceiling) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = S::BM, BN = S::BN, BK = S::BK, CE = S::CE, STAGES = S::STAGES, NT = S::threads, L = S::L;
  using E = typename S::E;
  const E* const x = static_cast<const E*>(x_in);
  const E* const image = static_cast<const E*>(image_in);
  // The keys' fold: keyed - 2 acc, and from the scaled float16 operands keyed - 2^(1 - ex - ec)
  // acc (a power of two: the same single rounding of the fused multiply-add).
  float key_scale = -2.f;
  if constexpr (S::Op::scaled)
    key_scale = ldexpf(-2.f, -f16_scale_exponent(sqrt(*cmax2)) - bound.operand_exponent);
  extern __shared__ __align__(16) unsigned char wgmma_raw[];
  unsigned char* const base = wgmma_raw + ((1024 - (shared_address(wgmma_raw) & 1023)) & 1023);
  unsigned char* const b_ring = base + S::a_bytes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = warp / 4, wq = warp % 4;
  const int gq = lane / 4, tq = lane % 4;

  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * BM;
  const int rows_here = static_cast<int>(n - row0 < BM ? n - row0 : BM);
  const int dp = (d + BK - 1) / BK * BK, ld = (d + CE - 1) / CE * CE;
  const int dtiles = dp / BK, ctiles = (k + BN - 1) / BN, tiles = dtiles * ctiles;

  // The block's objects, whole d, once: 16-byte chunk c8 of row r in slice s at its swizzled
  // place (chunk c8 ^ (r % 8) of the row's 128 bytes); zeros past the rows and d. The copies are
  // numbered (slice, row, chunk) so that every split is a shift (a division by d's chunks cost
  // 7% of the kernel's instructions).
  {
    const E* xb = x + row0 * ld;
    for (int q = threadIdx.x; q < dtiles * BM * 8; q += NT) {
      const int sl = q / (BM * 8), r = (q >> 3) & (BM - 1), c8 = q & 7, c4 = 8 * sl + c8;
      const bool in = r < rows_here && CE * c4 < d;
      gemm::cp_async<16>(base + sl * (BM * 128) + r * 128 + ((c8 ^ (r & 7)) << 4),
                         in ? xb + static_cast<std::int64_t>(r) * ld + CE * c4 : x, in);
    }
    gemm::cp_async_commit();
  }
  // The centroids' slices come as whole 16 KB stages from their tile image (wgmma_image_kernel
  // above: each slice already swizzled, so one bulk copy lays it out), each stage counted on its
  // mbarrier (the tiles' key terms are read from L1 in the fold). No barrier of the whole block: each warp waits
  // only for the stage it reads, and the last warp done with a stage refills it, so that one
  // warpgroup's fold overlaps the others' products (with __syncthreads after every slice, all
  // four folded at once and the tensor cores idled). The threads issued 2 cp.async a slice each
  // before, with their address arithmetic: 42% of the stall samples (ncu).
  __shared__ __align__(8) std::uint64_t full[STAGES], empty[STAGES];
  __shared__ unsigned released[STAGES];
  auto issue = [&](int t) {  // slice t into stage t % STAGES; one thread
    const int st = t % STAGES;
    mbarrier_expect_bytes(&full[st], static_cast<unsigned>(S::b_bytes));
    bulk_copy(b_ring + st * S::b_bytes, image + static_cast<std::size_t>(t) * (BN * BK), S::b_bytes, &full[st]);
  };
  // A warp is done with slice t's stage (its products complete): it arrives on the stage's
  // empty barrier, and the last of the block's warps to arrive (counted apart, so that exactly
  // one knows it is last) refills the stage with slice t + STAGES, after the barrier's wait
  // (which returns at once) orders every warp's reads before the copy.
  auto release = [&](int t) {
    __syncwarp();
    if (lane == 0) {
      const int st = t % STAGES;
      fence_proxy_async();  // this warp's reads of the stage before the copy's writes
      mbarrier_arrive(&empty[st]);
      if (atomicInc(&released[st], NT / 32 - 1) == NT / 32 - 1 && t + STAGES < tiles) {
        mbarrier_wait(&empty[st], static_cast<unsigned>(t / STAGES) & 1u);
        issue(t + STAGES);
      }
    }
  };
  if (threadIdx.x == 0) {
    for (int st = 0; st < STAGES; ++st) {
      mbarrier_init(&full[st], 1);
      mbarrier_init(&empty[st], NT / 32);
      released[st] = 0;
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int t = 0; t < STAGES && t < tiles; ++t) issue(t);
  gemm::cp_async_wait<0>();  // the objects landed for this thread ...
  fence_proxy_async();       // ... visible to the tensor cores' reads ...
  __syncthreads();           // ... for every thread

  // Each row's threshold (margin.hpp: "A threshold before the walk"): from its previous label q,
  // k_q = keyed[q] - 2 x'.c'_q summed in FP32 here, lanes l and l + 16 a half of d each, while
  // the tensor cores take the first slice. Keys at or above T never enter the lists, which
  // start full of T: a group of 8 keys then rarely has one below its list's last, where without
  // it most groups had some lane inserting and the whole warp waiting. With a single tile of
  // centroids (K <= 128) the row's extra reads cost more than they saved (H100: 1M x 128, K = 128
  // went 0.80 -> 0.94 ms per iteration); there the lists start at the tile's least key (below).
  // Tried and not kept (H100, same call): tile 0's least key as every K's
  // threshold, with no reads (10-33% slower: far more keys let in); these reads issued before
  // the objects land (ncu had put 10% of the stall samples on them here; -0.5% to +2.4%).
  const int row = wg * 64 + wq * 16 + (lane & 15);
  const int prev_label = !CEILING && ctiles > 1 && row < rows_here ? prev[row0 + row] : -1;
  // Lane (gq, tq)'s lists: rows gq and gq + 8 of its warp's 16, over the columns it holds in
  // the accumulators (2 tq and 2 tq + 1 of every 8), met in increasing order; the four lanes of a
  // row merge theirs at the end. (Through a 16 x 16 float chunk of shared memory per warp to a
  // lane per row and column half, the folds' stores and loads were as much
  // shared-memory traffic as the products' operands; ncu: L1 at 74% of its peak, the tensor
  // pipe at 35%.)
  TopL<float, L> own[2];
  top_clear(own[0]);
  top_clear(own[1]);
  auto set_thresholds = [&] {
    const int q = prev_label, half = lane >> 4;
    const bool known = q >= 0 && q < k;
    float s = 0.f;
    if (known) {
      const float* c = centred + static_cast<std::int64_t>(q) * d;
      const int per_half = dp / CE / 2;  // 16-byte chunks: 4 a slice
      for (int c4 = half * per_half; c4 < (half + 1) * per_half; c4 += 4) {
        float4 cv[4][CE / 4];  // four chunks' reads in flight
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int w = 0; w < CE / 4; ++w)
            cv[u][w] = CE * (c4 + u) + 4 * w < d ? __ldg(reinterpret_cast<const float4*>(c + CE * (c4 + u) + 4 * w))
                                                 : make_float4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int cu = c4 + u;
          const unsigned char* chunk = base + (cu >> 3) * (BM * 128) + row * 128 + (((cu & 7) ^ (row & 7)) << 4);
#pragma unroll
          for (int w = 0; w < CE / 4; ++w) {
            float4 xv;
            if constexpr (CE == 4) {
              xv = *reinterpret_cast<const float4*>(chunk);
            } else {  // four float16 objects' coordinates, exactly as floats
              const uint2 h = *reinterpret_cast<const uint2*>(chunk + 8 * w);
              const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&h.x));
              const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&h.y));
              xv = make_float4(lo.x, lo.y, hi.x, hi.y);
            }
            s = __fmaf_rn(xv.x, cv[u][w].x, s);
            s = __fmaf_rn(xv.y, cv[u][w].y, s);
            s = __fmaf_rn(xv.z, cv[u][w].z, s);
            s = __fmaf_rn(xv.w, cv[u][w].w, s);
          }
        }
      }
    }
    s += __shfl_xor_sync(0xffffffffu, s, 16);
    if constexpr (S::Op::scaled) s = ldexpf(s, -bound.operand_exponent);  // the objects' scale undone, exactly
    float threshold = INFINITY;  // row (lane & 15)'s
    if (known) {
      const std::int64_t i = row0 + row;
      const double x2 = xc2[i], c2 = *cmax2;
      const double t = static_cast<double>(keyed[q]) - 2.0 * static_cast<double>(s) +
                       3.0 * candidate_error(bound, x2, mu_norm, c2);
      threshold = __double2float_ru(t + candidate_margin(bound, x2, mu_norm, c2, t));
    }
    const float t0 = __shfl_sync(0xffffffffu, threshold, gq), t1 = __shfl_sync(0xffffffffu, threshold, gq + 8);
#pragma unroll
    for (int e = 0; e < L; ++e) {  // index INT_MAX: top_clear's
      own[0].v[e] = t0;
      own[1].v[e] = t1;
    }
  };

  float acc[S::ACC];
#pragma unroll
  for (int i = 0; i < S::ACC; ++i) acc[i] = 0.f;
  const unsigned a_slices = shared_address(base) + wg * 64 * 128, b_stages = shared_address(b_ring);
  // Slice by slice, one commit group of 4 wgmma each, one group left in flight while the next
  // slice's stage is awaited; the fold after each tile's last slice. (Every wgmma group in
  // flight keeps the accumulators' registers: only the fold, after waiting for all, reads them.)
  int t = 0, cs = 0;
  unsigned parity = 0;
  for (int ct = 0; ct < ctiles; ++ct) {
    for (int dt = 0; dt < dtiles; ++dt, ++t) {
      mbarrier_wait(&full[cs], parity);
      wgmma_fence();
      const unsigned a_low = descriptor_low(a_slices + dt * (BM * 128)),
                     b_low = descriptor_low(b_stages + cs * static_cast<unsigned>(S::b_bytes));
      wgmma_slice<typename S::Op>(acc, a_low, b_low, dt > 0);
      wgmma_commit();
      if (!CEILING && ct == 0 && dt == 0 && ctiles > 1) set_thresholds();  // beside the first slice's products
      wgmma_wait<1>();            // the previous slice's products done ...
      if (dt > 0) release(t - 1);  // ... its stage free
      if (++cs == STAGES) {
        cs = 0;
        parity ^= 1u;
      }
    }
    wgmma_wait<0>();  // the tile is complete: its keys into the lists
    fence_accumulators(acc);
    release(t - 1);  // the last slice's stage refilled during the fold
    const int tile0 = ct * BN;
    if (ctiles == 1 || (CEILING && ct == 0)) {
      // One tile, no threshold from a previous label: the row's least key first (the four lanes'
      // least), and T = least + M(least) (margin.hpp), so that only the keys the margin test can
      // need enter the lists (a key at or above T is beyond the margin of the best; a list left
      // with T's entries makes settle_object re-check against every centroid, as with the
      // previous label's threshold). With a ceiling (no previous labels either) the first tile's
      // least does the same for all tiles (the best key is at most it), below T_h where lower:
      // k-means||'s first round, whose ceilings (the distances to one random centre) let most
      // keys in, went 1.9 -> 1.6 ms with its re-checks (H100, 1M x 128, 535 candidates, by events).
      float least[2] = {INFINITY, INFINITY};
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const float2 nk = __ldg(reinterpret_cast<const float2*>(keyed + tile0 + 8 * j + 2 * tq));
#pragma unroll
        for (int h = 0; h < 2; ++h)
          least[h] = fminf(least[h], fminf(__fmaf_rn(key_scale, acc[4 * j + 2 * h], nk.x),
                                            __fmaf_rn(key_scale, acc[4 * j + 2 * h + 1], nk.y)));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        least[h] = fminf(least[h], __shfl_xor_sync(0xffffffffu, least[h], 1));
        least[h] = fminf(least[h], __shfl_xor_sync(0xffffffffu, least[h], 2));
      }
      // Lane tq works out row gq + 8 (tq & 1)'s threshold (one margin a lane, not two), the quad
      // takes both by shuffle; +inf (no threshold) past the rows or without a finite key.
      const int h = tq & 1, r = wg * 64 + wq * 16 + gq + 8 * h;
      const float lh = h ? least[1] : least[0];
      float threshold = INFINITY;
      if (r < rows_here && lh < INFINITY) {
        const double x2 = xc2[row0 + r], c2 = *cmax2, t = static_cast<double>(lh);
        threshold = __double2float_ru(t + candidate_margin(bound, x2, mu_norm, c2, t));
      }
      if (CEILING && r < rows_here)  // the lower of the two: a key at or above either is not needed
        threshold = fminf(threshold,
                          __double2float_ru(ceiling_threshold(bound, xc2[row0 + r], mu_norm, *cmax2, ceiling[row0 + r])));
      const float t0 = __shfl_sync(0xffffffffu, threshold, lane & ~3), t1 = __shfl_sync(0xffffffffu, threshold, lane | 1);
#pragma unroll
      for (int e = 0; e < L; ++e) {
        own[0].v[e] = t0;
        own[1].v[e] = t1;
      }
    }
#pragma unroll
    for (int g = 0; g < BN / 32; ++g) {  // accumulator n8 blocks 4g .. 4g + 3: 8 keys a row and lane
      float key[2][8];
      int col[8];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int j = 4 * g + b, c = tile0 + 8 * j + 2 * tq;
        // the key terms from L1 (4 KB at K = 1024); past K: +inf (the padding), a key no list takes
        const float2 nk = __ldg(reinterpret_cast<const float2*>(keyed + c));
        col[2 * b] = c;
        col[2 * b + 1] = c + 1;
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // keyed - 2 acc rounded once (one fused multiply-add), as fused_tensor_assign
          key[h][2 * b] = __fmaf_rn(key_scale, acc[4 * j + 2 * h], nk.x);
          key[h][2 * b + 1] = __fmaf_rn(key_scale, acc[4 * j + 2 * h + 1], nk.y);
        }
      }
      push_keys8(own[0], key[0], col);
      push_keys8(own[1], key[1], col);
    }
  }

  // The row's four lanes' lists merged, each lane merging only the list it ends with: lanes tq = 0
  // and 2 row gq's, tq = 1 and 3 row gq + 8's. Its neighbour (xor 1) sends the list it holds for
  // this lane's row; then the two halves of the quad (xor 2) swap their merged lists. Lane tq = 0
  // settles row gq, tq = 1 row gq + 8. (Both lists merged in every lane took twice the shuffles
  // and insertions.)
  TopL<float, L> mine, other;
#pragma unroll
  for (int e = 0; e < L; ++e) {
    mine.v[e] = tq & 1 ? own[1].v[e] : own[0].v[e];
    mine.i[e] = tq & 1 ? own[1].i[e] : own[0].i[e];
    other.v[e] = tq & 1 ? own[0].v[e] : own[1].v[e];
    other.i[e] = tq & 1 ? own[0].i[e] : own[1].i[e];
  }
  top_merge(mine, top_shfl_xor(other, 1));
  top_merge(mine, top_shfl_xor(mine, 2));
  const int settled = wg * 64 + wq * 16 + gq + 8 * (tq & 1);
  if (tq < 2 && settled < rows_here)
    settle_object<float, L, CEILING>(mine, row0 + settled, bound, xc2, mu_norm, *cmax2, labels, queue, everyone,
                                     queued);
#else
  (void)x_in, (void)image_in, (void)centred, (void)keyed, (void)cmax2, (void)xc2, (void)mu_norm, (void)n, (void)d, (void)k, (void)bound;
  (void)labels, (void)queue, (void)everyone, (void)queued, (void)prev, (void)ceiling;
  __trap();  // built for sm_90a only (src/kmeans/gpu/fused_wgmma.cu); never launched elsewhere
#endif
}

}  // namespace km::kernels
