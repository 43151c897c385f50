// SHA-256 (FIPS 180-4), for kernel cache keys and file checksums: a
// collision between two kernels would silently run the wrong code.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kf::cuda {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Adds the length first, so that ("ab", "c") and ("a", "bc") differ.
  void update_field(std::string_view s);
  Digest finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

Digest sha256(const void* data, size_t size);
std::string to_hex(const Digest& d);

}  // namespace kf::cuda
