#include "optstate/status.h"

#include <string>

namespace optstate {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
#define OPTSTATE_STATUS_WORDS(code, factory, words, id) \
    case StatusCode::code: return words;
    OPTSTATE_STATUS_CODES(OPTSTATE_STATUS_WORDS)
#undef OPTSTATE_STATUS_WORDS
  }
  return "unknown status code";
}

std::string_view StatusCodeId(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
#define OPTSTATE_STATUS_ID(code, factory, words, id) \
    case StatusCode::code: return id;
    OPTSTATE_STATUS_CODES(OPTSTATE_STATUS_ID)
#undef OPTSTATE_STATUS_ID
  }
  return "internal";
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

#define OPTSTATE_STATUS_FACTORY(code, factory, words, id) \
  Status factory(std::string m, SourceLocation o) { return Status(StatusCode::code, std::move(m), o); }
OPTSTATE_STATUS_CODES(OPTSTATE_STATUS_FACTORY)
#undef OPTSTATE_STATUS_FACTORY

}  // namespace optstate
