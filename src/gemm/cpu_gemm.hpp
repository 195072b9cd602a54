// The CPU GEMM kernels. All take the same GemmArgs (host pointers) and a thread count.
#pragma once

#include <string>

#include "gemm/gemm.hpp"

namespace km::gemm {

// The textbook triple loop, rows × columns split by `omp parallel for collapse(2)`.
template <class T>
void cpu_omp(const GemmArgs<T>& g, int threads);

// Cache-blocked: packed B panels shared by all threads, each thread a group of rows with
// its accumulators in vector registers (AVX-512 / AVX2 / baseline chosen at run time).
template <class T>
void cpu_blocked(const GemmArgs<T>& g, int threads);

// OpenBLAS cblas_?gemm on `threads` threads (the CPU reference).
template <class T>
void cpu_blas(const GemmArgs<T>& g, int threads);

// The validation scale |A|·|B| + |C| (see Check), computed with OpenBLAS into `scale`.
template <class T>
void cpu_scale(const GemmArgs<T>& g, T* scale, int threads);

// The name of the vector code cpu_blocked runs on this CPU ("avx512", "avx2", "baseline").
const char* cpu_blocked_isa();

// "openblas (<core>)": the kernel family OpenBLAS picked for this CPU. In a virtual machine
// it may fall back to an old core (Prescott) and run several times slower; the environment
// variable OPENBLAS_CORETYPE (e.g. SkylakeX, Haswell) overrides its choice.
std::string openblas_name();
// Empty, or a sentence saying OpenBLAS runs an older core than this CPU supports.
std::string openblas_warning();

}  // namespace km::gemm
