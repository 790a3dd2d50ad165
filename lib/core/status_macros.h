// Status propagation helpers for the implementation. Internal header.

#ifndef BIGSET_LIB_CORE_STATUS_MACROS_H_
#define BIGSET_LIB_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"

// Returns the status of `expr` from the enclosing function if it is not OK.
#define BIGSET_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    const absl::Status bigset_status_ = (expr);      \
    if (!bigset_status_.ok()) return bigset_status_; \
  } while (0)

#endif  // BIGSET_LIB_CORE_STATUS_MACROS_H_
