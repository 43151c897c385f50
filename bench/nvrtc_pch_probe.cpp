// NVRTC timings of unit sources, outside kfuse (not built by CMake): each
// file compiled with kfuse's options for sm_90 from a dlopen'ed NVRTC 13,
// as is (plain), or with the prelude (DIR/prelude.h) as an in-memory
// header and a precompiled header (auto: -pch --pch-dir=DIR/pch; explicit:
// the first file --create-pch=DIR/kf.pch, the others --use-pch; usepch:
// every file --use-pch=DIR/kf.pch). The files of the pch modes hold the
// unit without its prelude. REPS=n keeps the best of n compiles; EXTRA
// adds options (EXTRA=--time=- prints NVRTC's phase times). Session 30 of
// docs/perf-log.md:
//   g++ -O2 -std=c++17 -I/usr/local/cuda/include bench/nvrtc_pch_probe.cpp -o /tmp/probe -ldl
//   CUDA_CACHE_PATH=$(mktemp -d) /tmp/probe plain DIR unit.cu
#include <dlfcn.h>
#include <nvrtc.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <cstdlib>
using Clock = std::chrono::steady_clock;
static double ms(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
#define F(n) static decltype(&::n) p_##n;
F(nvrtcCreateProgram) F(nvrtcCompileProgram) F(nvrtcDestroyProgram) F(nvrtcGetProgramLogSize) F(nvrtcGetProgramLog)
F(nvrtcGetCUBINSize) F(nvrtcGetCUBIN) F(nvrtcGetPCHCreateStatus) F(nvrtcGetPCHHeapSizeRequired) F(nvrtcGetErrorString) F(nvrtcSetPCHHeapSize) F(nvrtcGetPCHHeapSize)
static std::string slurp(const char* f) { std::ifstream i(f); std::stringstream s; s << i.rdbuf(); return s.str(); }
int main(int argc, char** argv) {
  std::string mode = argv[1], dir = argv[2];
  auto t0 = Clock::now();
  void* h = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
#define R(n) p_##n = (decltype(p_##n))dlsym(h, #n);
  R(nvrtcCreateProgram) R(nvrtcCompileProgram) R(nvrtcDestroyProgram) R(nvrtcGetProgramLogSize) R(nvrtcGetProgramLog)
  R(nvrtcGetCUBINSize) R(nvrtcGetCUBIN) R(nvrtcGetPCHCreateStatus) R(nvrtcGetPCHHeapSizeRequired) R(nvrtcGetErrorString) R(nvrtcSetPCHHeapSize) R(nvrtcGetPCHHeapSize)
  printf("dlopen %.1f ms\n", ms(t0));
  std::string prelude = slurp((dir + "/prelude.h").c_str());
  for (int i = 3; i < argc; ++i) {
    std::string src = slurp(argv[i]);
    std::vector<std::string> opts = {"-std=c++17", "-default-device", "--gpu-architecture=sm_90", "--include-path=/usr/local/cuda/include"};
    std::vector<const char*> hdrs, names;
    std::string body = src;
    if (mode != "plain") {
      // src holds the unit without prelude
      body = "#include \"kf_prelude.h\"\n#pragma hdrstop\n" + src;
      if (mode == "auto" || mode == "explicit" || mode == "usepch") { hdrs.push_back(prelude.c_str()); names.push_back("kf_prelude.h"); }
      if (mode == "autofile" || mode == "explicitfile") opts.push_back("--include-path=" + dir);
      if (mode == "auto" || mode == "autofile") { opts.push_back("-pch"); opts.push_back("--pch-dir=" + dir + "/pch"); }
      if (mode == "usepch") opts.push_back("--use-pch=" + dir + "/kf.pch");
      if (mode == "explicit" || mode == "explicitfile") {
        if (i == 3) opts.push_back("--create-pch=" + dir + "/kf.pch"); else opts.push_back("--use-pch=" + dir + "/kf.pch");
      }
    }
    if (getenv("EXTRA")) { std::stringstream es(getenv("EXTRA")); std::string e; while (es >> e) opts.push_back(e); }
    std::vector<const char*> argvv; for (auto& o : opts) argvv.push_back(o.c_str());
    int reps = getenv("REPS") ? atoi(getenv("REPS")) : 1; double best = 1e9; nvrtcResult r; double create=0; nvrtcProgram p; std::string log; size_t cs=0; nvrtcResult pr;
    for (int rep = 0; rep < reps; ++rep) {
    if (rep) p_nvrtcDestroyProgram(&p);
    auto t1 = Clock::now();
    p_nvrtcCreateProgram(&p, body.c_str(), "k.cu", (int)hdrs.size(), hdrs.data(), names.data());
    create = ms(t1);
    auto t2 = Clock::now();
    r = p_nvrtcCompileProgram(p, (int)argvv.size(), argvv.data());
    double comp = ms(t2); if (comp < best) best = comp;
    if (mode == "explicit" && i == 3) { argvv.back() = ""; }
    }
    double comp = best;
    size_t ls = 0; p_nvrtcGetProgramLogSize(p, &ls); log.assign(ls, 0); p_nvrtcGetProgramLog(p, log.data());
    p_nvrtcGetCUBINSize(p, &cs);
    pr = p_nvrtcGetPCHCreateStatus(p);
    printf("%s: create %.2f compile %.1f ms r=%d cubin %zu pchstatus=%s log: %s\n", argv[i], create, comp, r, cs, p_nvrtcGetErrorString(pr), log.c_str());
    std::vector<char> cub(cs); p_nvrtcGetCUBIN(p, cub.data());
    std::ofstream(std::string(argv[i]) + "." + mode + ".cubin", std::ios::binary).write(cub.data(), cs);
    p_nvrtcDestroyProgram(&p);
  }
}
