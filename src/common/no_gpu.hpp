// "No NVIDIA GPU" is a normal state, said once (internal): in plain words, once
// per process, and not again in the processes a launcher or a sweep starts
// (they inherit TRAINSCOPE_NO_GPU_NOTED=1). Used by the CUDA event source's
// CPU-only warning, the sampler's NVML source, `trainscope run` and the sweep.
#ifndef TRAINSCOPE_SRC_COMMON_NO_GPU_HPP_
#define TRAINSCOPE_SRC_COMMON_NO_GPU_HPP_

#include <string>

namespace trainscope::detail {

// The words for it, at the start of every reason that means "no driver".
inline constexpr const char kNoGpuFound[] = "no NVIDIA GPU/driver found";
// Set in the environment of what a launcher starts once it has said it.
inline constexpr const char kNoGpuNotedVariable[] = "TRAINSCOPE_NO_GPU_NOTED";

// Whether this process, or the one that started it, already said it.
bool no_gpu_noted();
// Says "no NVIDIA GPU/driver found: <what is off>" through warn() unless
// no_gpu_noted(); afterwards no_gpu_noted() is true in this process.
void note_no_gpu(const std::string& what_is_off);
// no_gpu_noted() is true from now on (a caller said it in its own words).
void mark_no_gpu_noted();

}  // namespace trainscope::detail

#endif  // TRAINSCOPE_SRC_COMMON_NO_GPU_HPP_
