// The one loader of the CUDA libraries kfuse uses at run time: the driver,
// NVRTC, cuBLASLt and NCCL are opened with dlopen, never linked, so
// libkfuse.so loads on machines without them and only what needs a missing
// library fails. Where each is looked for is decided here, once:
//
//   driver    libcuda.so.1 from the default search only: it belongs to the
//             installed kernel driver; a toolkit holds only a stub of it.
//   NVRTC,    libnvrtc.so.13 / libnvrtc.so, libcublasLt.so.13 /
//   cuBLASLt, libcublasLt.so and libnccl.so.2 in each toolkit root
//   NCCL      (toolkit_roots()) under lib64, then targets/x86_64-linux/lib;
//             then the default search (LD_LIBRARY_PATH, rpath,
//             ld.so.cache), so a toolkit the caller names wins over
//             whatever else is installed.
//
// Handles are never closed: modules, programs and cuBLASLt handles made
// with them live until the process exits.
#pragma once

#include <string>
#include <vector>

namespace kf::cuda {

enum class CudaLibrary { Driver, Nvrtc, CublasLt, Nccl };

// $CUDA_HOME, $CUDA_PATH (each when set and not empty), /usr/local/cuda:
// the toolkit directories, in search order, without repeats. Read from the
// environment at each call.
std::vector<std::string> toolkit_roots();

// The files dlopen tries for `library`, in order (paths, or bare names for
// the default search).
std::vector<std::string> library_candidates(CudaLibrary library);

// An opened library, or why it could not be opened.
struct DynLib {
  std::string name;                 // for messages: "CUDA driver", "NVRTC", "cuBLASLt", "NCCL"
  void* handle = nullptr;           // null when no candidate loaded
  std::string path;                 // the file that was loaded
  std::vector<std::string> errors;  // dlerror() of each candidate tried before (or instead)
};

// Tries the candidates of `library` in order and keeps the first that loads.
DynLib open_library(CudaLibrary library);

// "\n  <dlerror>" for each failed candidate: the tail of a "could not be
// loaded:" message.
std::string attempts_text(const DynLib& lib);

// The address of `symbol` in `lib`, or null. When null and `error` is
// given and still empty, *error becomes "<name> lacks <symbol> (<path>)",
// so the first missing symbol is the one reported.
void* find_symbol(const DynLib& lib, const char* symbol, std::string* error = nullptr);

// find_symbol cast to the function pointer type of `fn` (the header's
// prototype, so the call sites stay type-checked).
template <class Fn>
void resolve(const DynLib& lib, const char* symbol, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(find_symbol(lib, symbol, &error));
}

}  // namespace kf::cuda
