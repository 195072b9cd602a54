// --gpus=N: one process, N GPUs, the rows split between them (kmeans/gpu/multi_gpu.cu).
#pragma once

#include <memory>

#include "dist/team.hpp"
#include "kmeans/implementation.hpp"

namespace km {

// An engine that runs `impl` on GPUs 0..params.gpus-1, each on a contiguous share of the
// rows, their integer partials summed with NCCL every iteration. Throws UsageError when impl
// cannot run on a part (its iteration is not accumulate / partials / apply) or the machine
// has fewer GPUs, DeviceError when NCCL cannot be loaded.
template <class T>
std::unique_ptr<Engine<T>> make_multi_gpu(const Implementation& impl, const Params& params);

// Under mpirun: makes this rank's GPU current, its rank on the node (OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID or SLURM_LOCALID; else its rank) modulo the node's GPUs.
void select_rank_device(Team& team);

}  // namespace km
