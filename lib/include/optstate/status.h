// Status and StatusOr<T>: the only error channel of the optstate library.
//
// Nothing in lib/ throws past its boundary, prints or exits. Every fallible
// function returns a Status (or a StatusOr<T> carrying a value), and each layer
// that passes an error up adds one piece of context in front of the message, so
// a user sees the whole path to the fault:
//
//   adam.pt: record 'archive/data.pkl': pickle: offset 1203: truncated input:
//   need 4 bytes for BININT, 1 left
//
// Codes are chosen by what went wrong, not where (after absl::StatusCode):
//   kTruncated        the input ends before a declared structure does (OutOfRange)
//   kCorrupt          bytes are present but inconsistent: bad magic, bad CRC,
//                     counts that contradict each other (DataLoss)
//   kUnsupported      valid input using a feature we do not implement (Unimplemented)
//   kLimitExceeded    a size or count beyond a configured limit (ResourceExhausted)
//   kIoError          the operating system refused a read or write
//   kInvalidArgument  the caller asked for something impossible (bad option, path)
//   kNotFound         a named thing (file, record, key path) does not exist
//   kInternal         a bug in optstate; never expected
//   kCancelled        stopped on request (RequestCancellation, file_io.h)
//
// An OK Status holds no allocation, so returning one costs a null pointer.
#ifndef OPTSTATE_STATUS_H_
#define OPTSTATE_STATUS_H_

#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace optstate {

#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
// clang 14 with libstdc++ 12 (the libFuzzer build) has no std::source_location;
// the same builtins give the caller's file and line through a default argument.
class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
    return SourceLocation(file, line);
  }
  constexpr const char* file_name() const { return file_; }
  constexpr unsigned line() const { return line_; }

 private:
  constexpr SourceLocation(const char* file, unsigned line) : file_(file), line_(line) {}
  const char* file_ = "";
  unsigned line_ = 0;
};
#endif

}  // namespace optstate
#include <variant>

namespace optstate {

// Every error code once: its enumerator, its factory, the words rendered
// messages use, and its stable id in JSON (schemas/error.schema.json). A new
// code is one line here (and one in that schema).
#define OPTSTATE_STATUS_CODES(X)                                               \
  X(kTruncated, TruncatedError, "truncated input", "truncated")                \
  X(kCorrupt, CorruptError, "corrupt data", "corrupt")                         \
  X(kUnsupported, UnsupportedError, "unsupported", "unsupported")              \
  X(kLimitExceeded, LimitExceededError, "limit exceeded", "limit_exceeded")    \
  X(kIoError, IoError, "I/O error", "io_error")                                \
  X(kInvalidArgument, InvalidArgumentError, "invalid argument", "invalid_argument") \
  X(kNotFound, NotFoundError, "not found", "not_found")                        \
  X(kInternal, InternalError, "internal error", "internal")                    \
  X(kCancelled, CancelledError, "cancelled", "cancelled")

enum class StatusCode {
  kOk = 0,
#define OPTSTATE_STATUS_ENUMERATOR(code, factory, words, id) code,
  OPTSTATE_STATUS_CODES(OPTSTATE_STATUS_ENUMERATOR)
#undef OPTSTATE_STATUS_ENUMERATOR
};

// "truncated input", "corrupt data", ...: the words used in rendered messages.
std::string_view StatusCodeName(StatusCode code);
// "truncated", "limit_exceeded", ...: the id error documents carry ("ok" for kOk).
std::string_view StatusCodeId(StatusCode code);

class [[nodiscard]] Status {
 public:
  // OK.
  Status() = default;
  // REQUIRES: code != kOk. `origin` records where the error was made; it is
  // shown by ToStringWithOrigin() (debug output), never in user messages.
  Status(StatusCode code, std::string message,
         SourceLocation origin = SourceLocation::current());

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message with all context, without the code name. Empty when OK.
  std::string_view message() const;

  // Returns this status with "context: " in front of the message. OK stays OK,
  // so callers may wrap unconditionally.
  Status WithContext(std::string_view context) &&;
  Status WithContext(std::string_view context) const&;

  // "corrupt data: adam.pt: ..." or "OK".
  std::string ToString() const;
  // ToString() plus " [lib/zip.cc:123]" for debugging.
  std::string ToStringWithOrigin() const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
    SourceLocation origin;
  };
  std::unique_ptr<Rep> rep_;
};

// Factories, one per code, so call sites read as what happened:
// TruncatedError(message), CorruptError(message), ...
#define OPTSTATE_STATUS_FACTORY(code, factory, words, id) \
  Status factory(std::string message, SourceLocation origin = SourceLocation::current());
OPTSTATE_STATUS_CODES(OPTSTATE_STATUS_FACTORY)
#undef OPTSTATE_STATUS_FACTORY

// A value or the Status saying why there is none. Constructing one from an OK
// Status is a bug and yields kInternal rather than an empty value.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : data_(status) { CheckNotOk(); }  // NOLINT: implicit by design
  StatusOr(Status&& status) : data_(std::move(status)) { CheckNotOk(); }  // NOLINT
  StatusOr(const T& value) : data_(value) {}                              // NOLINT
  StatusOr(T&& value) : data_(std::move(value)) {}                        // NOLINT
  template <typename U>
    requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
             !std::is_same_v<std::decay_t<U>, Status> && !std::is_same_v<std::decay_t<U>, StatusOr>)
  StatusOr(U&& value) : data_(std::in_place_index<1>, std::forward<U>(value)) {}  // NOLINT

  bool ok() const { return data_.index() == 1; }
  // OK when a value is held.
  Status status() const& { return ok() ? Status() : std::get<0>(data_); }
  Status status() && { return ok() ? Status() : std::move(std::get<0>(data_)); }

  // REQUIRES: ok(). Reading the value of an error is a programming error;
  // std::get would throw, which lib/ forbids, so check ok() first.
  const T& value() const& { return *std::get_if<1>(&data_); }
  T& value() & { return *std::get_if<1>(&data_); }
  T&& value() && { return std::move(*std::get_if<1>(&data_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*std::get_if<1>(&data_)); }
  const T* operator->() const { return std::get_if<1>(&data_); }
  T* operator->() { return std::get_if<1>(&data_); }

 private:
  void CheckNotOk() {
    if (std::get<0>(data_).ok()) data_ = InternalError("StatusOr built from an OK Status");
  }
  std::variant<Status, T> data_;
};

}  // namespace optstate

#define OPTSTATE_CONCAT_INNER_(a, b) a##b
#define OPTSTATE_CONCAT_(a, b) OPTSTATE_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the current function if it is not OK.
#define OPTSTATE_RETURN_IF_ERROR(expr)                            \
  do {                                                            \
    ::optstate::Status optstate_status_ = (expr);                 \
    if (!optstate_status_.ok()) return optstate_status_;          \
  } while (false)

// Like OPTSTATE_RETURN_IF_ERROR, adding context in front of the message.
#define OPTSTATE_RETURN_IF_ERROR_CTX(expr, context)                          \
  do {                                                                       \
    ::optstate::Status optstate_status_ = (expr);                            \
    if (!optstate_status_.ok())                                              \
      return std::move(optstate_status_).WithContext(context);               \
  } while (false)

// `lhs = value of expr`, or return its Status. lhs may declare a variable:
//   OPTSTATE_ASSIGN_OR_RETURN(uint32_t n, cursor.ReadU32LE("count"));
// It expands to several statements: under an `if`, use braces.
#define OPTSTATE_ASSIGN_OR_RETURN(lhs, expr) \
  OPTSTATE_ASSIGN_OR_RETURN_IMPL_(OPTSTATE_CONCAT_(optstate_or_, __LINE__), lhs, expr)
#define OPTSTATE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return std::move(tmp).status();        \
  lhs = std::move(tmp).value()

#endif  // OPTSTATE_STATUS_H_
