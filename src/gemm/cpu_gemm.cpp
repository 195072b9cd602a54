// CPU GEMM kernels. This file is compiled with -ffp-contract=fast (see CMakeLists.txt) so
// the blocked kernel's multiply-adds become FMAs, as they are in OpenBLAS.
#include "gemm/cpu_gemm.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "io/dataset.hpp"

namespace km::gemm {

namespace {

int team(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

template <class T, Op op>
void textbook(const GemmArgs<T>& g, int threads) {
  const std::size_t lda = g.lda, ldb = g.ldb, ldc = g.ldc;
  const T* a = g.a;
  const T* b = g.b;
#pragma omp parallel for collapse(2) schedule(static) num_threads(team(threads))
  for (int i = 0; i < g.m; ++i) {
    for (int j = 0; j < g.n; ++j) {
      T sum = 0;
      for (int p = 0; p < g.k; ++p) {
        const T x = op == Op::tn ? a[std::size_t(p) * lda + i] : a[std::size_t(i) * lda + p];
        const T y = op == Op::nt ? b[std::size_t(j) * ldb + p] : b[std::size_t(p) * ldb + j];
        sum += x * y;
      }
      if (op == Op::nt) sum += g.c[std::size_t(i) * ldc + j];
      g.d[std::size_t(i) * ldc + j] = sum;
    }
  }
}

// ---- blocked kernel -------------------------------------------------------------------
constexpr int kMaxMR = 8;  // most rows per register tile
// Panel depth and width (NB a multiple of every NR).
constexpr int kKB = 256;
constexpr int kNB = 256;

// One register tile: tile[MR][NR] (MR rows: 8 with 32 vector registers, else 4) = Σ_p ap[p][r] · bp[p][c], ap packed kb×MR, bp kb×NR.
// NR = 2 vectors of VB bytes. Defined once per instruction set.
#define KM_GEMM_MICRO(NAME, TARGET, VB, kMR)                                                        \
  template <class T>                                                                           \
  TARGET void NAME(const T* __restrict ap, const T* __restrict bp, int kb, T* __restrict tile) { \
    typedef T V __attribute__((vector_size(VB), aligned(VB)));                                 \
    constexpr int W = VB / int(sizeof(T));                                                     \
    V acc[kMR][2];                                                                             \
    for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = V{} ;                                \
    for (int p = 0; p < kb; ++p) {                                                             \
      V b0, b1;                                                                                \
      std::memcpy(&b0, bp + std::size_t(p) * 2 * W, VB);                                      \
      std::memcpy(&b1, bp + std::size_t(p) * 2 * W + W, VB);                                  \
      for (int r = 0; r < kMR; ++r) {                                                          \
        const T x = ap[p * kMR + r];                                                           \
        acc[r][0] += x * b0;                                                                   \
        acc[r][1] += x * b1;                                                                   \
      }                                                                                        \
    }                                                                                          \
    for (int r = 0; r < kMR; ++r) {                                                            \
      std::memcpy(tile + r * 2 * W, &acc[r][0], VB);                                          \
      std::memcpy(tile + r * 2 * W + W, &acc[r][1], VB);                                      \
    }                                                                                          \
  }

KM_GEMM_MICRO(micro_base, , 16, 4)
KM_GEMM_MICRO(micro_avx2, __attribute__((target("avx2,fma"))), 32, 4)
KM_GEMM_MICRO(micro_avx512, __attribute__((target("avx512f,fma"))), 64, 8)
#undef KM_GEMM_MICRO

enum class Isa { base, avx2, avx512 };
Isa detect_isa() {
  if (__builtin_cpu_supports("avx512f")) return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
  return Isa::base;
}

template <class T>
struct Micro {
  using Fn = void (*)(const T*, const T*, int, T*);
  Fn fn;
  int mr, nr;  // rows and columns per register tile
};
template <class T>
Micro<T> pick_micro() {
  switch (detect_isa()) {
    case Isa::avx512: return {micro_avx512<T>, 8, 2 * 64 / int(sizeof(T))};
    case Isa::avx2: return {micro_avx2<T>, 4, 2 * 32 / int(sizeof(T))};
    default: return {micro_base<T>, 4, 2 * 16 / int(sizeof(T))};
  }
}

template <class T>
void blocked(const GemmArgs<T>& g, int threads) {
  const Micro<T> micro = pick_micro<T>();
  const int nr = micro.nr, kMR = micro.mr;
  const int m = g.m, n = g.n, k = g.k;
  const int row_groups = (m + kMR - 1) / kMR;
  HostBuffer<T> bpack(std::size_t(kKB) * kNB);  // shared panel, NR-column strips, zero-padded
#pragma omp parallel num_threads(team(threads))
  {
    std::vector<T> ap(std::size_t(kKB) * kMaxMR);
    std::vector<T> tile(std::size_t(kMR) * nr);
    for (int jb = 0; jb < n; jb += kNB) {
      const int nb = std::min(kNB, n - jb);
      const int strips = (nb + nr - 1) / nr;
      for (int pb = 0; pb < k; pb += kKB) {
        const int kb = std::min(kKB, k - pb);
        // Pack B[pb..pb+kb, jb..jb+nb] as strips of nr columns: strip s holds kb rows of nr.
#pragma omp for schedule(static)
        for (int p = 0; p < kb; ++p) {
          for (int s = 0; s < strips; ++s) {
            T* dst = bpack.data() + (std::size_t(s) * kb + p) * nr;
            for (int c = 0; c < nr; ++c) {
              const int j = s * nr + c;
              dst[c] = j < nb ? b_elem(g, std::size_t(pb + p), std::size_t(jb + j)) : T(0);
            }
          }
        }  // implicit barrier: the panel is complete
#pragma omp for schedule(static)
        for (int rg = 0; rg < row_groups; ++rg) {
          const int i0 = rg * kMR;
          const int rows = std::min(kMR, m - i0);
          for (int p = 0; p < kb; ++p)
            for (int r = 0; r < kMR; ++r)
              ap[std::size_t(p) * kMR + r] = r < rows ? a_elem(g, std::size_t(i0 + r), std::size_t(pb + p)) : T(0);
          for (int s = 0; s < strips; ++s) {
            micro.fn(ap.data(), bpack.data() + std::size_t(s) * kb * nr, kb, tile.data());
            const int cols = std::min(nr, nb - s * nr);
            for (int r = 0; r < rows; ++r) {
              T* out = g.d + std::size_t(i0 + r) * g.ldc + jb + s * nr;
              const T* t = tile.data() + r * nr;
              if (pb == 0) {
                if (g.op == Op::nt) {
                  const T* cin = g.c + std::size_t(i0 + r) * g.ldc + jb + s * nr;
                  for (int c = 0; c < cols; ++c) out[c] = cin[c] + t[c];
                } else {
                  for (int c = 0; c < cols; ++c) out[c] = t[c];
                }
              } else {
                for (int c = 0; c < cols; ++c) out[c] += t[c];
              }
            }
          }
        }  // implicit barrier before the panel is overwritten
      }
    }
  }
}

inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha, const double* a,
                      std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}
inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a,
                      std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

template <class T>
void blas(const GemmArgs<T>& g, int threads) {
  openblas_set_num_threads(team(threads));
  T beta = 0;
  if (g.op == Op::nt) {
    if (g.c != g.d)
      for (int i = 0; i < g.m; ++i)
        std::memcpy(g.d + std::size_t(i) * g.ldc, g.c + std::size_t(i) * g.ldc, sizeof(T) * std::size_t(g.n));
    beta = 1;
  }
  blas_gemm(g.op == Op::tn ? CblasTrans : CblasNoTrans, g.op == Op::nt ? CblasTrans : CblasNoTrans, g.m, g.n, g.k,
            T(1), g.a, g.lda, g.b, g.ldb, beta, g.d, g.ldc);
}

}  // namespace

template <class T>
void cpu_omp(const GemmArgs<T>& g, int threads) {
  switch (g.op) {
    case Op::nn: textbook<T, Op::nn>(g, threads); break;
    case Op::tn: textbook<T, Op::tn>(g, threads); break;
    case Op::nt: textbook<T, Op::nt>(g, threads); break;
  }
}

template <class T>
void cpu_blocked(const GemmArgs<T>& g, int threads) {
  blocked(g, threads);
}

template <class T>
void cpu_blas(const GemmArgs<T>& g, int threads) {
  blas(g, threads);
}

template <class T>
void cpu_scale(const GemmArgs<T>& g, T* scale, int threads) {
  const Shape as = a_shape(g.op, g.m, g.k), bs = b_shape(g.op, g.n, g.k);
  HostBuffer<T> abs_a(as.size()), abs_b(bs.size()), abs_c(g.op == Op::nt ? std::size_t(g.m) * g.ldc : 0);
#pragma omp parallel for schedule(static) num_threads(team(threads))
  for (std::size_t r = 0; r < as.rows; ++r)
    for (std::size_t c = 0; c < as.cols; ++c) abs_a[r * as.cols + c] = std::abs(g.a[r * g.lda + c]);
#pragma omp parallel for schedule(static) num_threads(team(threads))
  for (std::size_t r = 0; r < bs.rows; ++r)
    for (std::size_t c = 0; c < bs.cols; ++c) abs_b[r * bs.cols + c] = std::abs(g.b[r * g.ldb + c]);
  GemmArgs<T> h = g;
  h.a = abs_a.data();
  h.lda = as.cols;
  h.b = abs_b.data();
  h.ldb = bs.cols;
  if (g.op == Op::nt) {
#pragma omp parallel for schedule(static) num_threads(team(threads))
    for (int i = 0; i < g.m; ++i)
      for (int j = 0; j < g.n; ++j) abs_c[std::size_t(i) * g.ldc + j] = std::abs(g.c[std::size_t(i) * g.ldc + j]);
    h.c = abs_c.data();
  }
  h.d = scale;
  blas(h, threads);
}

std::string openblas_name() { return std::string("openblas (") + openblas_get_corename() + ")"; }

std::string openblas_warning() {
  const std::string core = openblas_get_corename();
  const bool old = core == "Prescott" || core == "Core2" || core == "Penryn" || core == "Nehalem" ||
                   core == "Atom" || core == "Dunnington" || core == "Sandybridge";
  if (!old || detect_isa() == Isa::base) return {};
  return "OpenBLAS chose its " + core + " kernels on a CPU with " + cpu_blocked_isa() +
         " (a virtual machine's CPU model can mislead it); set OPENBLAS_CORETYPE=" +
         (detect_isa() == Isa::avx512 ? "SkylakeX" : "Haswell") + " for a fair reference";
}

const char* cpu_blocked_isa() {
  switch (detect_isa()) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "baseline";
  }
}

#define KM_INSTANTIATE(T)                                     \
  template void cpu_omp<T>(const GemmArgs<T>&, int);          \
  template void cpu_blocked<T>(const GemmArgs<T>&, int);      \
  template void cpu_blas<T>(const GemmArgs<T>&, int);         \
  template void cpu_scale<T>(const GemmArgs<T>&, T*, int);
KM_INSTANTIATE(float)
KM_INSTANTIATE(double)
#undef KM_INSTANTIATE

}  // namespace km::gemm
