// Where the runtime meets the planner's error values: the runtime throws, and `train`
// turns what it catches into one line and an exit code.
#pragma once

#include <optional>
#include <stdexcept>
#include <utility>

#include "planner/core/result.h"

namespace headroom {

// A failed write or unusable file fails the run with the planner's message.
inline void ThrowIfError(const std::optional<Error>& error) {
  if (error) throw std::runtime_error(error->message);
}

// The value, or the error thrown as above.
template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result) throw std::runtime_error(result.error().message);
  return std::move(*result);
}

}  // namespace headroom
