// Result<T>: a value or a user-facing error. Errors a user can cause (bad YAML, an
// unknown model, an impossible request) travel as values; invariants throw.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace headroom {

struct Error {
  std::string message;  // one line: what is wrong and, where possible, what to do
};

template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  const T& value() const& { return std::get<T>(state_); }
  T& value() & { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const Error& error() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

inline Error MakeError(std::string message) { return Error{std::move(message)}; }

}  // namespace headroom
