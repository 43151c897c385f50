// The shard stage: for a definition with a device mesh, propagates the
// declared shardings through the ops and inserts the communication the
// definition's global semantics need (docs/multidevice.md). Made once per
// definition by the definition cache, after simplify and before
// Fusion::finish, so every later stage (segmentation, both backends,
// `kfuse explain`) sees one graph whose values are each rank's local parts.
//
// A value is replicated (every rank holds it whole) or sharded along one
// dim (rank r holds block r of an even split). Rules, per op class:
//   pointwise     operands meet on the first sharded operand's dim: a
//                 replicated operand that covers that dim (and is not
//                 known to broadcast along it) is cut to this rank's block
//                 (shard_slice, no communication); an operand sharded
//                 elsewhere is gathered first.
//   reductions    over unsharded dims keep the sharding; over the sharded
//                 dim each rank reduces its block and an allreduce (sum,
//                 prod, max, min; avg for mean) finishes the value, or a
//                 reduce_scatter when the value is only an output asked to
//                 be sharded. var and var_mean over the sharded dim become
//                 a mean, an allreduce, the centred sum of squares and a
//                 second allreduce (two passes, as the unsharded op).
//   permute, squeeze, unsqueeze, and slice, pad, cat along other dims move
//                 the sharded dim with the data; other shape, indexing,
//                 creation and library ops work on whole values (sharded
//                 operands are gathered first).
//   size(x, d)    of a sharded dim is the global extent: local * ranks.
//   outputs       get the sharding asked for (gathering or cutting as
//                 needed), else keep the propagated one.
//
// What stays fixed: every value id of the definition keeps its global
// meaning, and its local part is computed under the same id, except a
// fusion output whose sharding changes at the end: Output::value then
// names the inserted value that holds it. Records are not touched.
#pragma once

#include "core/ir/fusion.h"

namespace kf {

// Rewrites fusion.exprs (appending values), fills fusion.shardings and each
// Output::sharding. No-op without a mesh. Call after simplify, before
// Fusion::finish. `kfuse explain` shows the result.
void shard(Fusion& fusion);

}  // namespace kf
