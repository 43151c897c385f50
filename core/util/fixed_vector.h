// A vector of at most N elements stored inline. Per-call work on shapes
// (every rank is at most kMaxRank) uses it so that a cached execute never
// touches the heap. Going past N is a bug in kfuse (ranks are checked when a
// fusion is defined) and throws KF_ERR_INTERNAL.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <span>
#include <vector>

#include "core/util/error.h"

namespace kf {

template <typename T, size_t N>
class FixedVector {
 public:
  FixedVector() = default;
  FixedVector(size_t n, const T& fill) { assign(n, fill); }
  FixedVector(std::initializer_list<T> items) { assign(items.begin(), items.end()); }
  template <std::input_iterator It>
  FixedVector(It first, It last) {
    assign(first, last);
  }
  explicit FixedVector(std::span<const T> items) { assign(items.begin(), items.end()); }

  void assign(size_t n, const T& fill) {
    check_fits(n);
    std::fill_n(items_.begin(), n, fill);
    size_ = n;
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    if constexpr (std::random_access_iterator<It>) {
      check_fits(static_cast<size_t>(last - first));
      size_ = static_cast<size_t>(std::copy(first, last, items_.begin()) - items_.begin());
    } else {
      size_ = 0;
      for (; first != last; ++first) push_back(*first);
    }
  }
  void resize(size_t n, const T& fill = T()) {
    check_fits(n);
    for (size_t i = size_; i < n; ++i) items_[i] = fill;
    size_ = n;
  }
  void push_back(const T& x) {
    check_fits(size_ + 1);
    items_[size_++] = x;
  }
  T* insert(const T* pos, const T& x) {
    check_fits(size_ + 1);
    const size_t at = static_cast<size_t>(pos - items_.data());
    std::move_backward(items_.begin() + at, items_.begin() + size_, items_.begin() + size_ + 1);
    items_[at] = x;
    ++size_;
    return items_.data() + at;
  }
  void clear() { size_ = 0; }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  static constexpr size_t capacity() { return N; }
  T* data() { return items_.data(); }
  const T* data() const { return items_.data(); }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T& back() { return items_[size_ - 1]; }
  const T& back() const { return items_[size_ - 1]; }

  operator std::span<const T>() const { return {items_.data(), size_}; }
  std::span<const T> span() const { return {items_.data(), size_}; }
  std::vector<T> to_vector() const { return {begin(), end()}; }

  friend bool operator==(const FixedVector& a, const FixedVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static void check_fits(size_t n) {
    if (n > N) [[unlikely]]
      fail(KF_ERR_INTERNAL, "a fixed-capacity vector needs ", n, " elements, it holds ", N);
  }
  std::array<T, N> items_{};
  size_t size_ = 0;
};

}  // namespace kf
