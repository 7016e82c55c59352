#include "optstate/status.h"

#include <string>

namespace optstate {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kTruncated: return "truncated input";
    case StatusCode::kCorrupt: return "corrupt data";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kLimitExceeded: return "limit exceeded";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kCancelled: return "cancelled";
  }
  return "unknown status code";
}

Status::Status(StatusCode code, std::string message, SourceLocation origin) {
  // A caller passing kOk with a message has a bug; keep the message visible
  // instead of silently producing OK.
  if (code == StatusCode::kOk) code = StatusCode::kInternal;
  rep_ = std::make_unique<Rep>(Rep{code, std::move(message), origin});
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  return *this;
}

std::string_view Status::message() const { return rep_ ? std::string_view(rep_->message) : ""; }

Status Status::WithContext(std::string_view context) && {
  // A layer that already named the same file (an output's writer) is not
  // repeated: "out.pt: write failed", not "out.pt: out.pt: write failed".
  bool named = rep_ && rep_->message.size() > context.size() && rep_->message.starts_with(context) &&
               rep_->message.compare(context.size(), 2, ": ") == 0;
  if (rep_ && !context.empty() && !named) {
    std::string joined;
    joined.reserve(context.size() + 2 + rep_->message.size());
    joined.append(context).append(": ").append(rep_->message);
    rep_->message = std::move(joined);
  }
  return std::move(*this);
}

Status Status::WithContext(std::string_view context) const& {
  return Status(*this).WithContext(context);
}

std::string Status::ToString() const {
  if (!rep_) return "OK";
  std::string out(StatusCodeName(rep_->code));
  out.append(": ").append(rep_->message);
  return out;
}

std::string Status::ToStringWithOrigin() const {
  std::string out = ToString();
  if (rep_) {
    out.append(" [").append(rep_->origin.file_name()).append(":");
    out.append(std::to_string(rep_->origin.line())).append("]");
  }
  return out;
}

Status TruncatedError(std::string m, SourceLocation o) {
  return Status(StatusCode::kTruncated, std::move(m), o);
}
Status CorruptError(std::string m, SourceLocation o) {
  return Status(StatusCode::kCorrupt, std::move(m), o);
}
Status UnsupportedError(std::string m, SourceLocation o) {
  return Status(StatusCode::kUnsupported, std::move(m), o);
}
Status LimitExceededError(std::string m, SourceLocation o) {
  return Status(StatusCode::kLimitExceeded, std::move(m), o);
}
Status IoError(std::string m, SourceLocation o) {
  return Status(StatusCode::kIoError, std::move(m), o);
}
Status InvalidArgumentError(std::string m, SourceLocation o) {
  return Status(StatusCode::kInvalidArgument, std::move(m), o);
}
Status NotFoundError(std::string m, SourceLocation o) {
  return Status(StatusCode::kNotFound, std::move(m), o);
}
Status InternalError(std::string m, SourceLocation o) {
  return Status(StatusCode::kInternal, std::move(m), o);
}
Status CancelledError(std::string m, SourceLocation o) {
  return Status(StatusCode::kCancelled, std::move(m), o);
}

}  // namespace optstate
