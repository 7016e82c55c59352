#include "optstate/status.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.h"

namespace optstate {
namespace {

TEST(StatusTest, DefaultIsOkAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, FactoriesSetCodeAndRenderCodeName) {
  EXPECT_EQ(TruncatedError("x").ToString(), "truncated input: x");
  EXPECT_EQ(CorruptError("x").ToString(), "corrupt data: x");
  EXPECT_EQ(UnsupportedError("x").ToString(), "unsupported: x");
  EXPECT_EQ(LimitExceededError("x").ToString(), "limit exceeded: x");
  EXPECT_EQ(IoError("x").ToString(), "I/O error: x");
  EXPECT_EQ(InvalidArgumentError("x").ToString(), "invalid argument: x");
  EXPECT_EQ(NotFoundError("x").ToString(), "not found: x");
  EXPECT_EQ(InternalError("x").ToString(), "internal error: x");
  EXPECT_EQ(CorruptError("x").code(), StatusCode::kCorrupt);
  EXPECT_EQ(CancelledError("x").ToString(), "cancelled: x");
  EXPECT_EQ(CancelledError("x").code(), StatusCode::kCancelled);
}

TEST(StatusTest, EveryCodeHasItsIdInTheErrorSchema) {
  // The ids error documents carry are exactly the schema's enum, in its order.
  std::ifstream in(testing::RepoPath("schemas/error.schema.json"));
  nlohmann::json schema = nlohmann::json::parse(in);
  std::vector<std::string> ids;
#define OPTSTATE_STATUS_ID_OF(code, factory, words, id) ids.push_back(std::string(StatusCodeId(StatusCode::code)));
  OPTSTATE_STATUS_CODES(OPTSTATE_STATUS_ID_OF)
#undef OPTSTATE_STATUS_ID_OF
  EXPECT_EQ(nlohmann::json(ids), schema["properties"]["error"]["properties"]["code"]["enum"]);
  EXPECT_EQ(StatusCodeId(StatusCode::kOk), "ok");
  EXPECT_EQ(StatusCodeId(StatusCode::kLimitExceeded), "limit_exceeded");
}

TEST(StatusTest, ContextIsPrependedPerLayerOutermostFirst) {
  Status s = TruncatedError("offset 12: need 4 bytes for BININT, 1 left")
                 .WithContext("pickle")
                 .WithContext("record 'archive/data.pkl'")
                 .WithContext("adam.pt");
  EXPECT_EQ(s.code(), StatusCode::kTruncated);
  EXPECT_EQ(s.message(),
            "adam.pt: record 'archive/data.pkl': pickle: offset 12: need 4 bytes for BININT, 1 left");
}

TEST(StatusTest, ContextAlreadyNamedIsNotRepeated) {
  Status s = IoError("out.pt: write failed: No space left on device").WithContext("out.pt");
  EXPECT_EQ(s.message(), "out.pt: write failed: No space left on device");
  // Only a whole leading name counts: "out.pt.zst" is another file.
  s = IoError("out.pt.zst: write failed").WithContext("out.pt");
  EXPECT_EQ(s.message(), "out.pt: out.pt.zst: write failed");
}

TEST(StatusTest, ContextOnOkStaysOk) {
  Status s = Status().WithContext("file.pt");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ConstContextLeavesOriginalUnchanged) {
  const Status base = CorruptError("bad");
  Status wrapped = base.WithContext("outer");
  EXPECT_EQ(base.message(), "bad");
  EXPECT_EQ(wrapped.message(), "outer: bad");
}

TEST(StatusTest, CopyIsDeep) {
  Status a = IoError("disk");
  Status b = a;
  b = std::move(b).WithContext("ctx");
  EXPECT_EQ(a.message(), "disk");
  EXPECT_EQ(b.message(), "ctx: disk");
}

TEST(StatusTest, OriginNamesTheCreatingLine) {
  Status s = CorruptError("x");
  int line = __LINE__ - 1;
  EXPECT_NE(s.ToStringWithOrigin().find("status_test.cc:" + std::to_string(line)),
            std::string::npos)
      << s.ToStringWithOrigin();
}

TEST(StatusTest, OkCodeWithMessageBecomesInternal) {
  Status s(StatusCode::kOk, "oops");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
}

StatusOr<int> Half(int v) {
  if (v % 2 != 0) return InvalidArgumentError(std::to_string(v) + " is odd");
  return v / 2;
}

StatusOr<int> Quarter(int v) {
  OPTSTATE_ASSIGN_OR_RETURN(int h, Half(v));
  OPTSTATE_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckQuarter(int v) {
  OPTSTATE_RETURN_IF_ERROR_CTX(Quarter(v).status(), "quarter of " + std::to_string(v));
  return Status();
}

TEST(StatusOrTest, ValueAndErrorPaths) {
  StatusOr<int> ok = Quarter(12);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  StatusOr<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ToString(), "invalid argument: 3 is odd");
  EXPECT_EQ(CheckQuarter(6).message(), "quarter of 6: 3 is odd");
  EXPECT_TRUE(CheckQuarter(8).ok());
}

TEST(StatusOrTest, FromOkStatusIsInternalError) {
  StatusOr<int> s = Status();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
}

TEST(StatusOrTest, HoldsMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> s = std::make_unique<int>(7);
  ASSERT_TRUE(s.ok());
  std::unique_ptr<int> p = std::move(s).value();
  EXPECT_EQ(*p, 7);
}

TEST(StatusOrTest, ConvertsCompatibleValues) {
  StatusOr<std::string> s = "abc";
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 3u);
}

}  // namespace
}  // namespace optstate
