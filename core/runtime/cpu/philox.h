// Philox 4x32-10 (Salmon et al. 2011, "Parallel random numbers: as easy as
// 1, 2, 3") and kfuse's counter scheme for uniform and normal. This comment
// is the specification the GPU backend reproduces: every element is computed
// on its own from (seed, offset, i), with no sequential state.
//
// Block function. Key k = (k0, k1), counter c = (c0, c1, c2, c3), all uint32.
// One round, with M0 = 0xD2511F53, M1 = 0xCD9E8D57 and 64-bit products
// p0 = M0 * c0, p1 = M1 * c2:
//   c' = (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0))
// Ten rounds; after each of the first nine, k0 += 0x9E3779B9 and
// k1 += 0xBB67AE85 (mod 2^32). The result is the four words (w0, w1, w2, w3).
//
// Scheme. seed and offset are int64 scalars, taken as their uint64 bits.
// For the element of row-major linear index i of the output (uint64):
//   key     = (lo32(seed), hi32(seed))
//   counter = (lo32(i), hi32(i), lo32(offset), hi32(offset))
// so one (seed, offset) pair yields an independent stream per element, and a
// caller advances `offset` between calls.
//
// Unit values (exact; no rounding happens in these steps):
//   u24(w)      = (w >> 8) * 2^-24                      in [0, 1), float32
//   u24o(w)     = ((w >> 8) + 1) * 2^-24                in (0, 1], float32
//   u53(a, b)   = ((uint64(a) << 32 | b) >> 11) * 2^-53 in [0, 1), float64
//   u53o(a, b)  = (((uint64(a) << 32 | b) >> 11) + 1) * 2^-53  in (0, 1]
//
// uniform(low, high), dtype float32/float16/bfloat16, all float32 operations
// rounded to nearest (no FMA contraction):
//   lo = float(low); hi = float(high); u = u24(w0)
//   d = hi - lo; p = d * u; r = lo + p
//   then r is rounded once to the dtype (identity for float32).
// uniform, dtype float64: the same three steps in double with u = u53(w0, w1).
// The result lies in [low, high]; rounding can give exactly `high`.
// Uniform is specified bit for bit: the GPU must match it exactly.
//
// normal(mean, std), dtype float32/float16/bfloat16, float32 operations:
//   u1 = u24o(w0); u2 = u24(w1)
//   l = kf_pm_logf(u1); m = -2.0f * l; s = sqrtf(m)
//   c = kf_pm_cos_turns_f(u2)   (cos(2 pi u2))
//   z = s * c; r = float(mean) + float(std) * z   (product rounded, then sum)
//   then r is rounded once to the dtype.
// normal, dtype float64: the same in double with u1 = u53o(w0, w1),
// u2 = u53(w2, w3), kf_pm_log and kf_pm_cos_turns.
// kf_pm_* are core/ir/portable_math.h: the same source compiled for the host
// and by NVRTC, with + - * / rounded one at a time, and sqrt is correctly
// rounded on both: so normal, like uniform, is bit-identical on the GPU.
//
// The CPU reference relies on the compiler not contracting a*b+c into an FMA
// (true for the default x86-64 target; other targets need -ffp-contract=off).
#pragma once

#include <array>
#include <cstdint>

namespace kf::cpu {

using PhiloxWords = std::array<uint32_t, 4>;

// Philox 4x32 with 10 rounds.
PhiloxWords philox4x32_10(PhiloxWords counter, std::array<uint32_t, 2> key);

// The four words for element `index` of a random op with this seed/offset.
PhiloxWords philox_element(uint64_t seed, uint64_t offset, uint64_t index);

// The unit values and samples of the scheme above.
float uniform_f32(const PhiloxWords& w, float low, float high);
double uniform_f64(const PhiloxWords& w, double low, double high);
float normal_f32(const PhiloxWords& w, float mean, float std);
double normal_f64(const PhiloxWords& w, double mean, double std);

}  // namespace kf::cpu
