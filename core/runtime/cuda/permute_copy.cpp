#include "core/runtime/cuda/permute_copy.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

#include "core/util/dl_layout.h"

namespace kf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxTile = 512;          // a group's tile extent at most (shared offset tables)
constexpr int64_t kMinElements = 16384;
constexpr int64_t kMinTile = 1024;
constexpr int kBlocksPerMultiprocessor = 4;  // resident at 64 registers: the launch bound's

int64_t pow2_at_least(int64_t x) {
  int64_t p = 1;
  while (p < x && p < kMaxTile) p *= 2;
  return p;
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Element k of thread t along a tile side of n: (index along it, index
// along the other side); the kernel's `walk` text on the host.
std::pair<int64_t, int64_t> element_of(int64_t n, int64_t threads, int64_t t, int64_t k) {
  if (n <= threads) return {t % n, t / n + threads / n * k};
  return {t + threads * (k % (n / threads)), k / (n / threads)};
}

std::string digits(const std::vector<int>& dims) {
  std::string s;
  for (int d : dims) s += std::to_string(d);
  return s;
}

}  // namespace

void choose_tile_layout(PermuteCopyPlan& p) {
  const int e = p.element_bytes, unit = std::max(e, 4), lanes = e == 8 ? 16 : 32;
  p.rows_along_b = p.tile_a < lanes;
  const int along = p.rows_along_b ? p.tile_b : p.tile_a, across = p.rows_along_b ? p.tile_a : p.tile_b;
  const int per_row = across >= lanes ? 1 : std::max(1, lanes / across * e / unit);
  // Rows start per_row units apart times an odd number: (start + unit) mod
  // banks then differ for all the rows one access crosses.
  for (p.pad = 0;; ++p.pad) {
    const int row = (along + p.pad) * e;
    if (row % unit == 0 && row / unit % per_row == 0 && row / unit / per_row % 2 == 1) return;
  }
}

PermuteCopyVariant PermuteCopyPlan::variant() const {
  PermuteCopyVariant v;
  v.element_bytes = static_cast<int8_t>(element_bytes);
  v.rank = static_cast<int8_t>(rank);
  v.size_a = static_cast<int8_t>(group_a.size());
  v.size_b = static_cast<int8_t>(group_b.size());
  for (size_t i = 0; i < group_a.size() && i < v.group_a.size(); ++i) v.group_a[i] = static_cast<int8_t>(group_a[i]);
  for (size_t i = 0; i < group_b.size() && i < v.group_b.size(); ++i) v.group_b[i] = static_cast<int8_t>(group_b[i]);
  v.tile_a = static_cast<int16_t>(tile_a);
  v.tile_b = static_cast<int16_t>(tile_b);
  v.pad = static_cast<int16_t>(pad);
  v.threads = static_cast<int16_t>(threads);
  v.rows_along_b = rows_along_b;
  v.index32 = index32;
  return v;
}

PermuteCopyPlan PermuteCopyVariant::kernel_plan() const {
  PermuteCopyPlan p;
  p.element_bytes = element_bytes;
  p.rank = rank;
  p.group_a.assign(group_a.begin(), group_a.begin() + size_a);
  p.group_b.assign(group_b.begin(), group_b.begin() + size_b);
  for (int d = rank - 1; d >= 0; --d)
    if (!contains(p.group_a, d) && !contains(p.group_b, d)) p.outer.push_back(d);
  p.tile_a = tile_a;
  p.tile_b = tile_b;
  p.pad = pad;
  p.threads = threads;
  p.rows_along_b = rows_along_b;
  p.index32 = index32;
  return p;
}

std::string PermuteCopyPlan::name() const {
  return "kf_permute_copy_e" + std::to_string(element_bytes) + "_r" + std::to_string(rank) + "_a" + digits(group_a) +
         "_b" + digits(group_b) + "_t" + std::to_string(tile_a) + "x" + std::to_string(tile_b) +
         (rows_along_b ? "_sb" : "_sa") + std::to_string(pad) + (index32 ? "_i32" : "_i64");
}

std::optional<PermuteCopyPlan> plan_permute_copy(const CopyLayout& l, int element_bytes, int multiprocessors,
                                                 int64_t max_grid_x) {
  const int r = static_cast<int>(l.sizes.size());
  if (r < 2 || r > 8 || l.numel < kMinElements || l.dst_strides[r - 1] != 1) return std::nullopt;
  // The source's dims by stride, fastest first; broadcast (stride 0) dims last.
  std::vector<int> src_order(r);
  for (int d = 0; d < r; ++d) src_order[d] = d;
  auto key = [&](int d) { return l.src_strides[d] == 0 ? INT64_MAX : std::llabs(l.src_strides[d]); };
  std::stable_sort(src_order.begin(), src_order.end(), [&](int a, int b) { return key(a) < key(b); });
  const int lead = src_order[0];
  if (l.src_strides[lead] != 1 || lead == r - 1) return std::nullopt;

  const int e = element_bytes;
  const int nominal_a = e == 1 ? 128 : e == 2 ? 64 : 32;
  const int nominal_b = 64;
  const int elements = nominal_a * nominal_b;

  PermuteCopyPlan p;
  p.element_bytes = e;
  p.rank = r;
  p.threads = kThreads;
  int64_t eb = 1, ea = 1;
  int next_b = r - 1;  // the destination's next dim for group B
  auto grow_b = [&](int64_t target) {
    while (eb < target && next_b >= 0 && !contains(p.group_a, next_b) && next_b != lead) {
      p.group_b.push_back(next_b);
      eb *= l.sizes[next_b--];
    }
  };
  grow_b(nominal_b);
  int64_t tb = std::min<int64_t>(pow2_at_least(eb), nominal_b);
  size_t next_a = 0;
  auto grow_a = [&](int64_t target) {
    while (ea < target && next_a < src_order.size()) {
      const int d = src_order[next_a];
      if (contains(p.group_b, d) || l.src_strides[d] == 0) break;
      p.group_a.push_back(d);
      ea *= l.sizes[d];
      ++next_a;
    }
  };
  const int64_t target_a = std::min<int64_t>(kMaxTile, elements / tb);
  grow_a(target_a);
  int64_t ta = std::min(pow2_at_least(ea), target_a);
  // Group A stayed short (stopped at group B): B takes what A lacks.
  const int64_t target_b = std::min<int64_t>(kMaxTile, elements / ta);
  if (target_b > tb) {
    grow_b(target_b);
    tb = std::min(pow2_at_least(eb), target_b);
  }
  if (ta * tb < kMinTile) return std::nullopt;
  p.tile_a = static_cast<int>(ta);
  p.tile_b = static_cast<int>(tb);
  choose_tile_layout(p);
  p.extent_a = ea;
  p.extent_b = eb;
  int64_t outer = 1;
  for (int d = r - 1; d >= 0; --d) {
    if (!contains(p.group_a, d) && !contains(p.group_b, d)) {
      p.outer.push_back(d);
      outer *= l.sizes[d];
    }
  }
  // Strides are >= 0: both tensors passed the entry checks.
  const int64_t src_span = element_reach(l.sizes, l.src_strides).max_offset;
  const int64_t dst_span = element_reach(l.sizes, l.dst_strides).max_offset;
  p.index32 = std::max({src_span, dst_span, l.numel}) < (int64_t{1} << 31);
  p.tiles = outer * ((ea + ta - 1) / ta) * ((eb + tb - 1) / tb);
  int64_t grid = std::min<int64_t>(p.tiles, max_grid_x > 0 ? max_grid_x : 65535);
  if (multiprocessors > 0) grid = std::min<int64_t>(grid, int64_t{multiprocessors} * kBlocksPerMultiprocessor);
  p.grid = grid;
  return p;
}

std::string permute_copy_source(const PermuteCopyPlan& plan) { return permute_copy_source(plan.variant()); }

std::string permute_copy_source(const PermuteCopyVariant& v) {
  const PermuteCopyPlan p = v.kernel_plan();
  const char* type = p.element_bytes == 1   ? "unsigned char"
                     : p.element_bytes == 2 ? "unsigned short"
                     : p.element_bytes == 4 ? "unsigned int"
                                            : "unsigned long long";
  const int r = p.rank;
  auto arg = [](int i) { return "args.a[" + std::to_string(i) + "]"; };
  auto k = [](int d) { return std::to_string(d); };
  const std::string ta = std::to_string(p.tile_a), tb = std::to_string(p.tile_b);
  const std::string row = std::to_string(p.row());
  const std::string at = p.rows_along_b ? "i * " + row + " + j" : "j * " + row + " + i";
  const std::string per_thread = std::to_string(p.tile_a * p.tile_b / p.threads), threads = std::to_string(p.threads);
  // Element k of thread t along a side of `n` (n and the threads powers of
  // two): "i, j" over (that side, the other), so that a thread's index
  // along the side stays put (n <= threads) or is a constant (n > threads).
  auto walk = [&](int n, const char* along, const char* other) {
    const std::string N = std::to_string(n);
    if (n <= p.threads)
      return std::string(along) + " = t % " + N + ", " + other + " = t / " + N + " + " +
             std::to_string(p.threads / n) + " * k";
    const std::string m = std::to_string(n / p.threads);
    return std::string(along) + " = t + " + threads + " * (k % " + m + "), " + other + " = k / " + m;
  };
  std::string s = "// kfuse permute copy: " + std::to_string(p.element_bytes) + "-byte elements, rank " + k(r) +
                  ", tiles of " + ta + " (dims " + digits(p.group_a) + ", the source's fastest first) x " + tb +
                  " (dims " + digits(p.group_b) + ", the destination's)\n"
                  "struct KfArgs { long long a[" + k(3 + 3 * r) + "]; };\n"
                  "typedef " + type + " T;\n" +
                  (p.index32 ? "typedef int I;\ntypedef unsigned int U;\n" : "typedef long long I;\ntypedef unsigned long long U;\n");
  // One tile: read along A (rows of ta, the source's contiguous walk) into
  // shared memory, then written along B. ra, rb: the tile's extents.
  s += "template <bool kFull>\n"
       "__device__ __forceinline__ void kf_move_tile(T* __restrict__ dst, const T* __restrict__ src, T* tile,\n"
       "    const I* a_src, const I* a_dst, const I* b_src, const I* b_dst, int ra, int rb) {\n"
       "  const int t = threadIdx.x;\n"
       "  T v[" + per_thread + "];\n"
       "#pragma unroll\n"
       "  for (int k = 0; k < " + per_thread + "; ++k) {\n"
       "    const int " + walk(p.tile_a, "i", "j") + ";\n"
       "    if (kFull || (i < ra && j < rb)) v[k] = src[a_src[i] + b_src[j]];\n"
       "  }\n"
       "#pragma unroll\n"
       "  for (int k = 0; k < " + per_thread + "; ++k) {\n"
       "    const int " + walk(p.tile_a, "i", "j") + ";\n"
       "    if (kFull || (i < ra && j < rb)) tile[" + at + "] = v[k];\n"
       "  }\n"
       "  __syncthreads();\n"
       "#pragma unroll\n"
       "  for (int k = 0; k < " + per_thread + "; ++k) {\n"
       "    const int " + walk(p.tile_b, "j", "i") + ";\n"
       "    if (kFull || (i < ra && j < rb)) dst[a_dst[i] + b_dst[j]] = tile[" + at + "];\n"
       "  }\n"
       "}\n";
  s += "extern \"C\" __global__ void __launch_bounds__(" + threads + ", " + std::to_string(kBlocksPerMultiprocessor) + ") " + p.name() + "(KfArgs args) {\n"
       "  __shared__ T tile[" + (p.rows_along_b ? ta : tb) + " * " + row + "];\n"
       "  __shared__ I a_src[" + ta + "], a_dst[" + ta + "], b_src[" + tb + "], b_dst[" + tb + "];\n"
       "  T* const dst = (T*)args.a[0];\n"
       "  const T* const src = (const T*)args.a[1];\n";
  auto extent = [&](const std::vector<int>& g) {
    std::string e = "(U)" + arg(3 + g[0]);
    for (size_t i = 1; i < g.size(); ++i) e += " * (U)" + arg(3 + g[i]);
    return e;
  };
  s += "  const U ea = " + extent(p.group_a) + ", eb = " + extent(p.group_b) + ";\n"
       "  const U na = (ea + " + ta + " - 1) / " + ta + ", nb = (eb + " + tb + " - 1) / " + tb + ";\n"
       "  const U tiles = (U)(" + arg(2) + " / (long long)(ea * eb)) * na * nb;\n"
       "  for (U q = blockIdx.x; q < tiles; q += gridDim.x) {\n"
       "    U rest = q;\n"
       "    const U b0 = rest % nb * " + tb + ";\n"
       "    rest /= nb;\n"
       "    const U a0 = rest % na * " + ta + ";\n"
       "    rest /= na;\n"
       "    long long s = 0, d = 0;\n";
  // The dims in neither group, innermost first; the outermost takes the rest.
  for (size_t i = 0; i < p.outer.size(); ++i) {
    const int d = p.outer[i];
    const bool last = i + 1 == p.outer.size();
    s += "    {\n"
         "      const U x = rest" + (last ? std::string() : " % (U)" + arg(3 + d)) + ";\n" +
         (last ? "" : "      rest /= (U)" + arg(3 + d) + ";\n") +
         "      s += (long long)x * " + arg(3 + r + d) + ";\n"
         "      d += (long long)x * " + arg(3 + 2 * r + d) + ";\n"
         "    }\n";
  }
  // The tables of offsets along each group, one entry per thread.
  auto decompose = [&](const std::vector<int>& g, const std::string& indent) {
    std::string t;
    for (size_t i = 0; i < g.size(); ++i) {
      const bool last = i + 1 == g.size();
      t += indent + "{\n" + indent + "  const U x = g" + (last ? std::string() : " % (U)" + arg(3 + g[i])) + ";\n" +
           (last ? "" : indent + "  g /= (U)" + arg(3 + g[i]) + ";\n") +
           indent + "  so += (I)x * (I)" + arg(3 + r + g[i]) + ";\n" +
           indent + "  do_ += (I)x * (I)" + arg(3 + 2 * r + g[i]) + ";\n" + indent + "}\n";
    }
    return t;
  };
  s += "    __syncthreads();  // the previous tile is written out\n"
       "    for (int u = threadIdx.x; u < " + ta + " + " + tb + "; u += " + threads + ") {\n"
       "      I so = 0, do_ = 0;\n"
       "      if (u < " + ta + ") {\n"
       "        U g = a0 + u;\n"
       "        if (g < ea) {\n" + decompose(p.group_a, "          ") +
       "        }\n"
       "        a_src[u] = so;\n"
       "        a_dst[u] = do_;\n"
       "      } else {\n"
       "        U g = b0 + (u - " + ta + ");\n"
       "        if (g < eb) {\n" + decompose(p.group_b, "          ") +
       "        }\n"
       "        b_src[u - " + ta + "] = so;\n"
       "        b_dst[u - " + ta + "] = do_;\n"
       "      }\n"
       "    }\n"
       "    __syncthreads();\n"
       "    const int ra = ea - a0 < " + ta + " ? (int)(ea - a0) : " + ta + ";\n"
       "    const int rb = eb - b0 < " + tb + " ? (int)(eb - b0) : " + tb + ";\n"
       "    if (ra == " + ta + " && rb == " + tb + ")\n"
       "      kf_move_tile<true>(dst + d, src + s, tile, a_src, a_dst, b_src, b_dst, ra, rb);\n"
       "    else\n"
       "      kf_move_tile<false>(dst + d, src + s, tile, a_src, a_dst, b_src, b_dst, ra, rb);\n"
       "  }\n"
       "}\n";
  return s;
}

void permute_copy_walk(const PermuteCopyPlan& p, const CopyLayout& l, int64_t grid,
                       const std::function<void(int64_t, int64_t)>& move) {
  const int64_t ta = p.tile_a, tb = p.tile_b, per_thread = ta * tb / p.threads;
  int64_t ea = 1, eb = 1;
  for (int d : p.group_a) ea *= l.sizes[d];
  for (int d : p.group_b) eb *= l.sizes[d];
  const int64_t na = (ea + ta - 1) / ta, nb = (eb + tb - 1) / tb, tiles = l.numel / (ea * eb) * na * nb;
  std::vector<int64_t> a_src(ta), a_dst(ta), b_src(tb), b_dst(tb), tile((p.rows_along_b ? ta : tb) * p.row(), -1);
  auto decompose = [&](const std::vector<int>& g, int64_t x, int64_t& so, int64_t& dso) {
    so = dso = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const int64_t idx = i + 1 == g.size() ? x : x % l.sizes[g[i]];
      x /= l.sizes[g[i]];
      so += idx * l.src_strides[g[i]];
      dso += idx * l.dst_strides[g[i]];
    }
  };
  for (int64_t block = 0; block < grid; ++block)
    for (int64_t q = block; q < tiles; q += grid) {
      int64_t rest = q;
      const int64_t b0 = rest % nb * tb;
      rest /= nb;
      const int64_t a0 = rest % na * ta;
      rest /= na;
      int64_t s = 0, d = 0;
      for (size_t i = 0; i < p.outer.size(); ++i) {
        const int k = p.outer[i];
        const int64_t x = i + 1 == p.outer.size() ? rest : rest % l.sizes[k];
        rest /= l.sizes[k];
        s += x * l.src_strides[k];
        d += x * l.dst_strides[k];
      }
      for (int64_t u = 0; u < ta + tb; ++u) {
        int64_t so = 0, dso = 0;
        if (u < ta) {
          if (a0 + u < ea) decompose(p.group_a, a0 + u, so, dso);
          a_src[u] = so, a_dst[u] = dso;
        } else {
          if (b0 + u - ta < eb) decompose(p.group_b, b0 + u - ta, so, dso);
          b_src[u - ta] = so, b_dst[u - ta] = dso;
        }
      }
      const int64_t ra = std::min(ea - a0, ta), rb = std::min(eb - b0, tb);
      for (int64_t t = 0; t < p.threads; ++t)  // read phase: the tile holds source offsets
        for (int64_t k = 0; k < per_thread; ++k) {
          const auto [i, j] = element_of(p.tile_a, p.threads, t, k);
          if (i < ra && j < rb) tile[p.shared_index(i, j)] = s + a_src[i] + b_src[j];
        }
      for (int64_t t = 0; t < p.threads; ++t)
        for (int64_t k = 0; k < per_thread; ++k) {
          const auto [j, i] = element_of(p.tile_b, p.threads, t, k);
          if (i < ra && j < rb) move(d + a_dst[i] + b_dst[j], tile[p.shared_index(i, j)]);
        }
    }
}

int shared_wavefronts(const std::vector<int64_t>& addresses, int bytes) {
  const size_t phase = bytes == 8 ? 16 : 32;
  int total = 0;
  for (size_t begin = 0; begin < addresses.size(); begin += phase) {
    std::map<int64_t, std::vector<int64_t>> words_of_bank;
    for (size_t t = begin; t < std::min(addresses.size(), begin + phase); ++t)
      for (int64_t w = addresses[t] / 4; w <= (addresses[t] + bytes - 1) / 4; ++w) {
        auto& words = words_of_bank[w % 32];
        if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
      }
    size_t most = 0;
    for (const auto& [bank, words] : words_of_bank) most = std::max(most, words.size());
    total += static_cast<int>(most);
  }
  return total;
}

}  // namespace kf::cuda
