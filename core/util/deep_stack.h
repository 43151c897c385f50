// Stages that recurse once per op of a chain (codegen's value-at-index
// evaluation, the shard stage's conversions) run where the stack's size is
// known: on the caller's stack while the fusion is shallow, else on a
// thread of their own with a large stack, the caller waiting for it. The
// caller's own stack (a JVM thread's 1 MB, a goroutine's system thread)
// then does not decide how deep a fusion may be; the definition's depth
// limit (kMaxGraphDepth, core/ir/fusion.h) does, with a wide margin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

namespace kf {

// Depth (longest producer -> consumer chain of ops) up to which the
// recursive stages run on the caller's stack: measured at most ~2 KB of
// stack per level in a Release build (docs/guarantees.md), so ~128 KB at
// this depth (several times that under ASan), well within a 1 MB thread's
// stack. Deeper fusions pay one thread start per codegen or definition.
constexpr int64_t kInlineDepth = 64;
// The stack of the thread that runs them deeper: reserved address space,
// committed only as far as it is used.
constexpr size_t kDeepStackBytes = size_t{256} << 20;

// Runs fn on a new thread with a stack of `bytes` and waits for it; an
// exception fn throws is rethrown here, on the caller's thread.
void run_with_stack(size_t bytes, const std::function<void()>& fn);

// fn(), on the caller's stack when depth <= kInlineDepth, else through
// run_with_stack(kDeepStackBytes).
template <typename F>
auto on_deep_stack(int64_t depth, F&& fn) -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  if (depth <= kInlineDepth) return fn();
  if constexpr (std::is_void_v<R>) {
    run_with_stack(kDeepStackBytes, [&] { fn(); });
  } else {
    std::optional<R> result;
    run_with_stack(kDeepStackBytes, [&] { result.emplace(fn()); });
    return std::move(*result);
  }
}

}  // namespace kf
