// Error values and Result<T>: the one error mechanism inside the library.
//
// Result<T> mirrors the interface of std::expected<T, Error> (has_value, operator*,
// operator->, value, error) so it can become std::expected when the project moves to
// C++23. No exception crosses a public header; parse boundaries catch third-party
// exceptions and convert them into an Error naming the field path.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace memtune {

// What kind of failure an Error is. The CLI maps these to exit codes:
// kInvalidInput/kInvalidConfig/kNotFound/kUnsupported -> 2, kInternal -> 3.
enum class ErrorCode {
  kInvalidInput,   // malformed document, trace, snapshot or flag value
  kInvalidConfig,  // well-formed but violates a rule (names field, value, what is allowed)
  kNotFound,       // unknown preset, GPU, file
  kUnsupported,    // a feature memtune does not model yet
  kInternal,       // a bug in memtune
};

// A user-facing error. `field` is the dotted path of the offending input
// ("model.tensor_model_parallel_size", "trace:17"), or empty. `message` is one
// sentence without a trailing period; `hint` is an optional suggestion
// ("did you mean 'hidden_size'?").
struct Error {
  ErrorCode code = ErrorCode::kInvalidInput;
  std::string field;
  std::string message;
  std::string hint;

  // "field: message" (or just message), without the hint.
  std::string Describe() const {
    return field.empty() ? message : field + ": " + message;
  }
};

// Convenience constructors.
inline Error InvalidInput(std::string field, std::string message, std::string hint = {}) {
  return Error{ErrorCode::kInvalidInput, std::move(field), std::move(message), std::move(hint)};
}
inline Error InvalidConfig(std::string field, std::string message, std::string hint = {}) {
  return Error{ErrorCode::kInvalidConfig, std::move(field), std::move(message), std::move(hint)};
}
inline Error NotFound(std::string field, std::string message, std::string hint = {}) {
  return Error{ErrorCode::kNotFound, std::move(field), std::move(message), std::move(hint)};
}
inline Error Unsupported(std::string field, std::string message, std::string hint = {}) {
  return Error{ErrorCode::kUnsupported, std::move(field), std::move(message), std::move(hint)};
}

// Holds either a T or an Error. Accessing the wrong alternative is a programmer error
// (std::get throws std::bad_variant_access, which the CLI reports as exit code 3).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(runtime/explicit)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(runtime/explicit)

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result for operations with no value.
struct Ok {};
using Status = Result<Ok>;
inline Status OkStatus() { return Ok{}; }

}  // namespace memtune

#define MEMTUNE_CONCAT_INNER_(a, b) a##b
#define MEMTUNE_CONCAT_(a, b) MEMTUNE_CONCAT_INNER_(a, b)

// MEMTUNE_TRY(lhs, expr): evaluates expr (a Result<U>); on error returns the Error from
// the enclosing function, otherwise move-assigns the value to lhs (which may be a
// declaration: MEMTUNE_TRY(auto job, ParseJob(text));).
#define MEMTUNE_TRY(lhs, expr) MEMTUNE_TRY_IMPL_(lhs, expr, MEMTUNE_CONCAT_(memtune_try_, __LINE__))
#define MEMTUNE_TRY_IMPL_(lhs, expr, tmp) \
  auto tmp = (expr);                      \
  if (!tmp.has_value()) return tmp.error(); \
  lhs = std::move(tmp).value()

// MEMTUNE_RETURN_IF_ERROR(expr): for Status / Result whose value is not needed.
#define MEMTUNE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    auto memtune_status_ = (expr);                       \
    if (!memtune_status_.has_value()) return memtune_status_.error(); \
  } while (0)
