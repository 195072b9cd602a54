// GEMM 6 — tensor: warp-level matrix multiply-accumulate on the tensor cores (mma.sync).
//   double: FP64 mma (m8n8k4 on sm_80+, m16n8k4 / m16n8k8 on sm_90), full double precision;
//   float:  TF32 mma m16n8k8 — inputs rounded to 10 mantissa bits, accumulation in FP32.
//           Opt-in only (gemm --allow-tf32), and the report says "tf32".
// A block of warps computes a BM×BN tile, each warp a WM×WN sub-tile as FM×FN mma tiles
// with its accumulators in registers. Operand tiles move global→shared with cp.async in a
// STAGES-deep ring (zero-filled past the edges), each kept in its storage order (k- or
// m/n-contiguous) with a row padding that makes every fragment read conflict-free.
#pragma once

#include "kernels/gemm/common.cuh"
#include "kernels/gemm/launch.cuh"

namespace km::kernels::gemm {

// Fragment ownership, common to every shape used here (PTX ISA, "matrix fragments for
// mma"): with g = lane / 4 and t = lane % 4,
//   A element i: row g + 8·(i & 1), column t + 4·(i >> 1)
//   B element i: row t + 4·i,        column g
//   C element i: row g + 8·(i >> 1), column 2t + (i & 1)
struct MmaF64m8n8k4 {
  using T = double;
  using Reg = double;
  static constexpr int M = 8, N = 8, K = 4, A = 1, B = 1, C = 2;
  static constexpr const char* name = "fp64 mma m8n8k4";
  __device__ static Reg convert(double x) { return x; }
  __device__ static void mma(double* c, const Reg* a, const Reg* b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                 : "+d"(c[0]), "+d"(c[1])
                 : "d"(a[0]), "d"(b[0]));
  }
  // c = a.b: the product onto a zero accumulator (the same bits as mma onto zeros), with no
  // registers to clear first.
  __device__ static void mma_zero(double* c, const Reg* a, const Reg* b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%4,%4};\n"
                 : "=d"(c[0]), "=d"(c[1])
                 : "d"(a[0]), "d"(b[0]), "d"(0.0));
  }
};
struct MmaF64m16n8k4 {
  using T = double;
  using Reg = double;
  static constexpr int M = 16, N = 8, K = 4, A = 2, B = 1, C = 4;
  static constexpr const char* name = "fp64 mma m16n8k4";
  __device__ static Reg convert(double x) { return x; }
  __device__ static void mma(double* c, const Reg* a, const Reg* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]));
#else
    __trap();  // the host never selects this shape below sm_90
#endif
  }
  __device__ static void mma_zero(double* c, const Reg* a, const Reg* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
                 : "=d"(c[0]), "=d"(c[1]), "=d"(c[2]), "=d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]), "d"(0.0));
#else
    __trap();
#endif
  }
};
struct MmaF64m16n8k8 {
  using T = double;
  using Reg = double;
  static constexpr int M = 16, N = 8, K = 8, A = 4, B = 2, C = 4;
  static constexpr const char* name = "fp64 mma m16n8k8";
  __device__ static Reg convert(double x) { return x; }
  __device__ static void mma(double* c, const Reg* a, const Reg* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
    __trap();
#endif
  }
  __device__ static void mma_zero(double* c, const Reg* a, const Reg* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=d"(c[0]), "=d"(c[1]), "=d"(c[2]), "=d"(c[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]), "d"(0.0));
#else
    __trap();
#endif
  }
};
struct MmaTf32m16n8k8 {
  using T = float;
  using Reg = unsigned;
  static constexpr int M = 16, N = 8, K = 8, A = 4, B = 2, C = 4;
  static constexpr const char* name = "tf32 mma m16n8k8";
  __device__ static Reg convert(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
  }
  // The same operand in one integer add: x's bits plus half a TF32 unit in the last place (2^12
  // in the 13 low bits, which the tensor cores ignore, i.e. truncate): cvt.rna's round-half-away
  // result, where cvt.rna.tf32 is two instructions on sm_90 (a test for infinity and a predicated
  // add). Whatever the hardware makes of the low bits (ignored, or any number of them kept and
  // the rest dropped), the value it reads lies within 2^-11 2^e <= 2^-11 |x| of x
  // (2^e <= |x| < 2^(e+1)): the bound margin.hpp charges a TF32 operand. For finite x below
  // 2^127 (the add carries at most into the exponent). The fused delta kernel's objects
  // (6_fused_delta.cuh, MMA); GpuTf32.HalfUpReadsAsRna checks this device's reading.
  __device__ static Reg convert_half_up(float x) { return __float_as_uint(x) + 0x1000u; }
  __device__ static void mma(float* c, const Reg* a, const Reg* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  // d = a b + c0 (four accumulators from one float4: no register copies where it was just loaded).
  __device__ static void mma_from(float* d, const Reg* a, const Reg* b, const float4& c0) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c0.x), "f"(c0.y), "f"(c0.z),
          "f"(c0.w));
  }
  __device__ static void mma_zero(float* c, const Reg* a, const Reg* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
  }
};

// Shared-memory geometry of one operand tile: `rows` × `cols` in storage order (cols
// contiguous), padded so a row's start moves 4 banks (k-contiguous) or 8 banks (the other).
template <class T, bool K_CONTIGUOUS, int MN, int BK>
struct TileGeometry {
  static constexpr int rows = K_CONTIGUOUS ? MN : BK;
  static constexpr int cols = K_CONTIGUOUS ? BK : MN;
  static constexpr int pad = K_CONTIGUOUS ? 4 : (sizeof(T) == 8 ? 4 : 8);
  static constexpr int stride = cols + pad;
  static constexpr int elems = rows * stride;
  // Element (mn, kk) of the tile: row mn / column kk of A, or column mn / row kk of B.
  __device__ static int at(int mn, int kk) { return K_CONTIGUOUS ? mn * stride + kk : kk * stride + mn; }
};

template <class Mma, int BM, int BN, int BK, int STAGES, Op op>
constexpr std::size_t tensor_smem_bytes() {
  using TA = TileGeometry<typename Mma::T, a_k_contiguous<op>, BM, BK>;
  using TB = TileGeometry<typename Mma::T, b_k_contiguous<op>, BN, BK>;
  return std::size_t(STAGES) * (TA::elems + TB::elems) * sizeof(typename Mma::T);
}

// Copies one BK-deep slice of an operand tile (MN rows or columns from mn0, k from p0) into
// shared memory, VEC elements per copy; `base`/`ld` is the operand in its storage order.
template <bool K_CONTIGUOUS, int MN, int BK, int NT, int VEC, class T>
__device__ __forceinline__ void tensor_load_tile(const T* base, std::size_t ld, int mn_end, int k_end, T* s, int mn0,
                                                 int p0) {
  using TG = TileGeometry<T, K_CONTIGUOUS, MN, BK>;
  constexpr int BYTES = VEC * int(sizeof(T));
#pragma unroll
  for (int q = 0; q < TG::rows * TG::cols / VEC / NT; ++q) {
    const int c = threadIdx.x + q * NT;
    const int r = c / (TG::cols / VEC), col = (c % (TG::cols / VEC)) * VEC;
    const int mn = K_CONTIGUOUS ? mn0 + r : mn0 + col, p = K_CONTIGUOUS ? p0 + col : p0 + r;
    const bool in = mn < mn_end && p < k_end;
    const T* src = in ? base + (K_CONTIGUOUS ? std::size_t(mn) * ld + p : std::size_t(p) * ld + mn) : base;
    cp_async<BYTES>(s + r * TG::stride + col, src, in);
  }
}

// Copies one BK-deep slice of A and B (starting at p0) into a stage.
template <Op op, class T, int BM, int BN, int BK, int NT, int VEC>
__device__ __forceinline__ void tensor_load_stage(const GemmArgs<T>& g, T* as, T* bs, int row0, int col0, int p0) {
  tensor_load_tile<a_k_contiguous<op>, BM, BK, NT, VEC>(g.a, g.lda, g.m, g.k, as, row0, p0);
  tensor_load_tile<b_k_contiguous<op>, BN, BK, NT, VEC>(g.b, g.ldb, g.n, g.k, bs, col0, p0);
}

template <Op op, class Mma, int BM, int BN, int BK, int WM, int WN, int STAGES, int VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, 1) gemm_tensor(GemmArgs<typename Mma::T> g) {
  using T = typename Mma::T;
  using Reg = typename Mma::Reg;
  using TA = TileGeometry<T, a_k_contiguous<op>, BM, BK>;
  using TB = TileGeometry<T, b_k_contiguous<op>, BN, BK>;
  constexpr int NT = (BM / WM) * (BN / WN) * 32;
  constexpr int FM = WM / Mma::M, FN = WN / Mma::N;
  static_assert(WM % Mma::M == 0 && WN % Mma::N == 0 && BK % Mma::K == 0, "warp tile must hold whole mma tiles");
  static_assert(TA::rows * TA::cols % (VEC * NT) == 0 && TB::rows * TB::cols % (VEC * NT) == 0,
                "stage loads must split evenly");

  extern __shared__ __align__(16) unsigned char gemm_tensor_raw[];
  T* smem = reinterpret_cast<T*>(gemm_tensor_raw);
  auto stage_a = [&](int s) { return smem + s * (TA::elems + TB::elems); };
  auto stage_b = [&](int s) { return smem + s * (TA::elems + TB::elems) + TA::elems; };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gq = lane / 4, tq = lane % 4;
  const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

  T acc[FM][FN][Mma::C];
#pragma unroll
  for (int a = 0; a < FM; ++a)
#pragma unroll
    for (int b = 0; b < FN; ++b)
#pragma unroll
      for (int e = 0; e < Mma::C; ++e) acc[a][b][e] = T(0);

  const int tiles = (g.k + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles) tensor_load_stage<op, T, BM, BN, BK, NT, VEC>(g, stage_a(s), stage_b(s), row0, col0, s * BK);
    cp_async_commit();
  }
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<STAGES - 2>();  // slice t has landed (for this thread) ...
    __syncthreads();              // ... and for all; everyone is done with slice t-1's stage
    const int next = t + STAGES - 1;
    if (next < tiles)
      tensor_load_stage<op, T, BM, BN, BK, NT, VEC>(g, stage_a(next % STAGES), stage_b(next % STAGES), row0, col0,
                                                    next * BK);
    cp_async_commit();  // possibly empty: keeps the group count uniform

    const T* as = stage_a(t % STAGES);
    const T* bs = stage_b(t % STAGES);
#pragma unroll
    for (int kk = 0; kk < BK; kk += Mma::K) {
      Reg af[FM][Mma::A], bf[FN][Mma::B];
#pragma unroll
      for (int a = 0; a < FM; ++a)
#pragma unroll
        for (int e = 0; e < Mma::A; ++e)
          af[a][e] = Mma::convert(as[TA::at(wm0 + a * Mma::M + gq + 8 * (e & 1), kk + tq + 4 * (e >> 1))]);
#pragma unroll
      for (int b = 0; b < FN; ++b)
#pragma unroll
        for (int e = 0; e < Mma::B; ++e) bf[b][e] = Mma::convert(bs[TB::at(wn0 + b * Mma::N + gq, kk + tq + 4 * e)]);
#pragma unroll
      for (int a = 0; a < FM; ++a)
#pragma unroll
        for (int b = 0; b < FN; ++b) Mma::mma(acc[a][b], af[a], bf[b]);
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int a = 0; a < FM; ++a)
#pragma unroll
    for (int b = 0; b < FN; ++b)
#pragma unroll
      for (int e = 0; e < Mma::C; ++e) {
        const int i = row0 + wm0 + a * Mma::M + gq + 8 * (e >> 1);
        const int j = col0 + wn0 + b * Mma::N + 2 * tq + (e & 1);
        if (i < g.m && j < g.n) store_d<op>(g, i, j, acc[a][b][e]);
      }
}


constexpr int kTensorStages = 3;

template <class Mma, int BM, int BN, int BK, int WM, int WN>
void launch_tensor_shape(const GemmArgs<typename Mma::T>& g, cudaStream_t s) {
  using T = typename Mma::T;
  constexpr int threads = (BM / WM) * (BN / WN) * 32, vec = 16 / int(sizeof(T));
  const dim3 grid = grid_2d(std::size_t(g.n), BN, std::size_t(g.m), BM, "tensor");
  const bool vectors = vectorizable(g, vec);
  with_op(g.op, [&](auto op) {
    constexpr Op O = decltype(op)::value;
    constexpr std::size_t smem = tensor_smem_bytes<Mma, BM, BN, BK, kTensorStages, O>();
    auto kernel = vectors ? gemm_tensor<O, Mma, BM, BN, BK, WM, WN, kTensorStages, vec>
                          : gemm_tensor<O, Mma, BM, BN, BK, WM, WN, kTensorStages, 1>;
    cuda::opt_in_shared(kernel, smem, "--kernel=tensor");
    kernel<<<grid, threads, smem, s>>>(g);
  });
}

// The FP64 shape: --mma, else m16n8k4 on sm_90 (fastest there), m8n8k4 before.
inline int tensor_mma_shape(const GpuOptions& o) { return o.mma ? o.mma : compute_capability() >= 90 ? 1684 : 884; }

// Double: 128×128×16 tiles, warps of 64×32. Float (TF32): 128×128×32.
template <class T>
void launch_tensor(const GemmArgs<T>& g, const GpuOptions& o, cudaStream_t s, cublasHandle_t) {
  if constexpr (sizeof(T) == 4) {
    launch_tensor_shape<MmaTf32m16n8k8, 128, 128, 32, 64, 32>(g, s);
  } else {
    switch (tensor_mma_shape(o)) {
      case 884: launch_tensor_shape<MmaF64m8n8k4, 128, 128, 16, 64, 32>(g, s); break;
      case 1688: launch_tensor_shape<MmaF64m16n8k8, 128, 128, 16, 64, 32>(g, s); break;
      default: launch_tensor_shape<MmaF64m16n8k4, 128, 128, 16, 64, 32>(g, s); break;
    }
  }
}

inline std::string tensor_math(bool is_double, const GpuOptions& o) {
  if (!is_double) return MmaTf32m16n8k8::name;
  const int shape = tensor_mma_shape(o);
  return shape == 884 ? MmaF64m8n8k4::name : shape == 1688 ? MmaF64m16n8k8::name : MmaF64m16n8k4::name;
}

// TF32 only when asked; the sm_90 FP64 shapes only on sm_90 (without a GPU, the caller says a GPU is needed).
inline Support tensor_supports(bool is_double, const GpuOptions& o, const GpuInfo& gpu) {
  if (!is_double && !o.allow_tf32)
    return {false, "--kernel=tensor in float runs on TF32 (10-bit mantissa inputs, ~1e-3 relative error); add "
                   "--allow-tf32 to accept that, or use --precision=double (FP64 tensor cores)"};
  if (is_double && (o.mma == 1684 || o.mma == 1688) && gpu.present && gpu.compute_capability < 90)
    return {false, strprintf("--mma=%d needs sm_90 (this device is sm_%d)", o.mma, gpu.compute_capability)};
  return {};
}

}  // namespace km::kernels::gemm
