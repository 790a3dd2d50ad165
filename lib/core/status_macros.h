// Status propagation helpers for the implementation. Internal header.

#ifndef BIGSET_LIB_CORE_STATUS_MACROS_H_
#define BIGSET_LIB_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"

// Returns the status of `expr` from the enclosing function if it is not OK.
#define BIGSET_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    const absl::Status bigset_status_ = (expr);      \
    if (!bigset_status_.ok()) return bigset_status_; \
  } while (0)

// Evaluates `expr` (an absl::StatusOr); returns its status from the
// enclosing function if it is not OK, else moves its value into `lhs` (a
// declaration or an lvalue). One statement; not for the body of an
// unbraced if or loop.
#define BIGSET_ASSIGN_OR_RETURN(lhs, expr) \
  BIGSET_ASSIGN_OR_RETURN_IMPL_(           \
      BIGSET_STATUS_CONCAT_(bigset_statusor_, __LINE__), lhs, expr)

#define BIGSET_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(*tmp)
#define BIGSET_STATUS_CONCAT_(a, b) BIGSET_STATUS_CONCAT_INNER_(a, b)
#define BIGSET_STATUS_CONCAT_INNER_(a, b) a##b

#endif  // BIGSET_LIB_CORE_STATUS_MACROS_H_
