#include "fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace optstate::testing {

std::string RepoPath(const std::string& relative) { return std::string(OPTSTATE_REPO) + "/" + relative; }

std::string ReadFileOrFail(const std::string& relative) {
  std::ifstream in(RepoPath(relative), std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << RepoPath(relative);
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string FileContents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json ExpectedJson(const std::string& fixture_relative) {
  std::string text = ReadFileOrFail(fixture_relative + ".expected.json");
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::vector<std::string> AllFixtures() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  const std::string suffix = ".expected.json";
  for (const auto& entry : fs::recursive_directory_iterator(RepoPath("testdata/good"))) {
    std::string p = entry.path().string();
    if (!p.ends_with(suffix)) continue;
    std::string fixture = p.substr(0, p.size() - suffix.size());
    if (!fs::is_regular_file(fixture)) continue;  // a DCP directory's description
    out.push_back(fs::relative(fixture, OPTSTATE_REPO).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace optstate::testing
