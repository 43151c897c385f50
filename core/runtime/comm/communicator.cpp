#include "core/runtime/comm/communicator.h"

namespace kf {

const char* comm_reduce_name(CommReduce r) {
  switch (r) {
    case CommReduce::Sum: return "sum";
    case CommReduce::Prod: return "prod";
    case CommReduce::Max: return "max";
    case CommReduce::Min: return "min";
    case CommReduce::Avg: return "avg";
  }
  return "invalid";
}

}  // namespace kf
