// Access to testdata/ for unit tests: fixture bytes and their .expected.json,
// written by real PyTorch (testdata/gen/).
#ifndef OPTSTATE_TESTS_UNIT_FIXTURES_H_
#define OPTSTATE_TESTS_UNIT_FIXTURES_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace optstate::testing {

// Absolute path of a file under the repository ("testdata/good/torch113/x.pt").
std::string RepoPath(const std::string& relative);
// The whole file; fails the current test (and returns "") when unreadable.
std::string ReadFileOrFail(const std::string& relative);
// The whole file at `path` (any path, e.g. a test's output); "" when unreadable.
std::string FileContents(const std::string& path);
// Parsed "<fixture>.expected.json".
nlohmann::json ExpectedJson(const std::string& fixture_relative);
// Every fixture (a file with an .expected.json beside it) under testdata/good,
// as repository-relative paths, sorted.
std::vector<std::string> AllFixtures();

}  // namespace optstate::testing

#endif  // OPTSTATE_TESTS_UNIT_FIXTURES_H_
