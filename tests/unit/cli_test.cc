// The CLI run in-process through RunCli: parsing, dispatch, exit codes, streams.
// (tests/cli/ runs the real binary against golden files.)
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_app.h"
#include "fixtures.h"

namespace optstate::tools {
namespace {

struct CliResult {
  int exit_code;
  std::string out;
  std::string err;
};

CliResult RunOptstate(std::vector<std::string> args) {
  args.insert(args.begin(), "optstate");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  CommandOutput output{out, err};
  int code = RunCli(static_cast<int>(argv.size()), argv.data(), output);
  return {code, out.str(), err.str()};
}

TEST(CliTest, VersionPrintsProjectVersionAndTheCommitOfAClone) {
  CliResult r = RunOptstate({"--version"});
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_EQ(std::string(OPTSTATE_VERSION), "0.2.0");
  std::string git = kGitDescription;
  EXPECT_EQ(r.out, std::string("optstate ") + OPTSTATE_VERSION + (git.empty() ? "" : " (git " + git + ")") + "\n");
  EXPECT_EQ(r.err, "");
  // Built from this repository's clone, the commit is named (a tarball has no .git).
  if (std::filesystem::exists(testing::RepoPath(".git"))) {
    EXPECT_GE(git.size(), 7u) << "git describe gave nothing for a clone";
    EXPECT_EQ(git.find_first_not_of("0123456789abcdefv.-dirtyg"), std::string::npos) << git;
  }
}

TEST(CliTest, HelpListsCommandsAndExitCodes) {
  CliResult r = RunOptstate({"--help"});
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_NE(r.out.find("inspect"), std::string::npos);
  EXPECT_NE(r.out.find("Exit codes: 0 ok, 1 findings"), std::string::npos);
}

TEST(CliTest, SubcommandHelpHasExamples) {
  CliResult r = RunOptstate({"inspect", "--help"});
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_NE(r.out.find("Examples:\n  optstate inspect checkpoint.pt"), std::string::npos) << r.out;
}

TEST(CliTest, NoCommandIsUsageError) {
  CliResult r = RunOptstate({});
  EXPECT_EQ(r.exit_code, kExitError);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("Run 'optstate --help' for usage."), std::string::npos) << r.err;
}

TEST(CliTest, UnknownOptionIsUsageError) {
  CliResult r = RunOptstate({"inspect", "--frobnicate", "x.pt"});
  EXPECT_EQ(r.exit_code, kExitError);
  EXPECT_NE(r.err.find("--frobnicate"), std::string::npos) << r.err;
}

TEST(CliTest, InspectMissingFileNamesIt) {
  CliResult r = RunOptstate({"inspect", "/nonexistent.pt"});
  EXPECT_EQ(r.exit_code, kExitError);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "optstate inspect: error: not found: /nonexistent.pt: cannot open: No such file or "
            "directory\n");
}

TEST(CliTest, InspectJsonErrorGoesToStdoutToo) {
  CliResult r = RunOptstate({"inspect", "--json", "/nonexistent.pt"});
  EXPECT_EQ(r.exit_code, kExitError);
  nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["error"]["code"].get<std::string>(), "not_found");
}

TEST(CliTest, InspectJsonMatchesFixtureFacts) {
  const std::string fixture = "testdata/good/torch26/combined.pt";
  CliResult r = RunOptstate({"inspect", "--json", "--verify-crc", testing::RepoPath(fixture)});
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out);
  nlohmann::json expected = testing::ExpectedJson(fixture);
  EXPECT_EQ(doc["format"].get<std::string>(), "zip");
  EXPECT_EQ(doc["file_size"], expected["file_size"]);
  EXPECT_EQ(doc["zip"]["prefix"].get<std::string>(), "combined");
  EXPECT_EQ(doc["zip"]["byteorder"].get<std::string>(), "little");
  EXPECT_TRUE(doc["zip"]["crc_checked"].get<bool>());
  EXPECT_EQ(doc["zip"]["records"].size(), expected["container"]["records"].size());
}

}  // namespace
}  // namespace optstate::tools
