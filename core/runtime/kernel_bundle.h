// Ahead-of-time kernel bundles (issue 46, item 3): the compiled kernels of
// some fusions at some shape classes for one GPU architecture, in one file
// that an application loads so that its calls never run NVRTC. Written by
// `kfuse compile` (or kf_bundle_add/kf_bundle_save), loaded with
// kf_bundle_load. No CUDA types here: the C API and the CLI use this; the
// CUDA backend implements it (cuda/bundle.cpp), and a build without it
// says so (cuda_unavailable.cpp). docs/cuda-runtime.md, "Bundles".
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/pipeline/plan.h"

namespace kf {

struct KernelBundle;  // cuda/bundle.h

// An empty bundle for architecture `sm` (10 * major + minor, at least 80).
std::shared_ptr<KernelBundle> make_kernel_bundle(int sm);
// Compiles every kernel of every generated segment of `plan` (each
// plan's variants too: whichever a call takes is in the bundle) that the
// bundle lacks, with NVRTC for the bundle's architecture. Needs no GPU.
void bundle_add_plan(KernelBundle& bundle, const Plan& plan);
size_t bundle_kernel_count(const KernelBundle& bundle);
int bundle_sm(const KernelBundle& bundle);
// Writes the bundle to `path` (a temporary file renamed over it).
void save_kernel_bundle(const KernelBundle& bundle, const std::string& path);
// Reads and checks the bundle at `path` and installs it for the process's
// life: from then on, a kernel whose generated source it holds for the
// device's architecture is taken from it. device >= 0: the bundle's
// architecture must be that device's. Returns its kernel count.
size_t load_kernel_bundle(const std::string& path, int device);

}  // namespace kf
