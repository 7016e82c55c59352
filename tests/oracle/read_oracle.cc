// The read oracle: every checkpoint of a corpus directory, read by optstate,
// against what torch.load showed when the corpus was made (<file>.expected.json,
// testdata/gen/describe.py): structure, key types, dtypes, shapes, strides,
// storage sharing and a CRC-32 of every tensor's values.
//
// Usage: optstate_read_oracle DIR...
// Prints one JSON line per file, {"dir", "file", "agrees", "difference"}, for
// tests/oracle/check_corpus.py to count; exits 0 whatever it found (the driver
// decides), 2 when a directory cannot be listed or an expected.json is unreadable.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph_compare.h"
#include "optstate/checkpoint.h"

namespace {

using nlohmann::json;

std::string Difference(const std::string& file, const json& want) {
  optstate::StatusOr<std::unique_ptr<optstate::CheckpointFile>> cp = optstate::OpenCheckpoint(file);
  if (!cp.ok()) return "optstate cannot read it: " + cp.status().ToString();
  optstate::testing::GraphComparer cmp((*cp)->checkpoint().graph, cp->get());
  cmp.SetExpectedStorages(want["storages"]);
  std::string d = cmp.Compare((*cp)->checkpoint().graph.root, want["root"], "$");
  if (d.empty()) d = cmp.CompareStorages(want["storages"]);
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const std::string suffix = ".expected.json";
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(argv[i], ec)) {
      std::string p = e.path().string();
      if (p.ends_with(suffix) && fs::is_regular_file(p.substr(0, p.size() - suffix.size()))) files.push_back(p);
    }
    if (ec) {
      std::cerr << "optstate_read_oracle: " << argv[i] << ": " << ec.message() << "\n";
      return 2;
    }
    std::sort(files.begin(), files.end());
    for (const std::string& p : files) {
      std::ifstream in(p);
      std::stringstream text;
      text << in.rdbuf();
      json want = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
      if (want.is_discarded()) {
        std::cerr << "optstate_read_oracle: " << p << ": not JSON\n";
        return 2;
      }
      std::string file = p.substr(0, p.size() - suffix.size());
      std::string d = Difference(file, want);
      std::cout << json{{"dir", argv[i]}, {"file", fs::path(file).filename().string()}, {"agrees", d.empty()},
                        {"difference", d}}
                       .dump()
                << "\n";
    }
  }
  return 0;
}
