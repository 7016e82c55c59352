// Replays corpora through the fuzz targets in an ordinary build, so that every
// input a fuzzer ever found interesting (and every crash, once fixed) stays a
// test. Usage: optstate_fuzz_replay ROOT...  where each ROOT holds one
// directory per target name (testdata/fuzz/, and the seeds make_seeds.py
// cuts from testdata/). Every target must get at least one input.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace optstate::fuzz {

std::map<std::string, TargetFn>& Registry() {
  static std::map<std::string, TargetFn> targets;
  return targets;
}

bool Register(const char* name, TargetFn fn) {
  Registry()[name] = fn;
  return true;
}

}  // namespace optstate::fuzz

namespace {

// The input being replayed, named by the signal handler if a target crashes.
char current_input[4096];

void NameInputAndDie(int sig) {
  const char prefix[] = "\nfuzz replay crashed on: ";
  (void)!::write(2, prefix, sizeof prefix - 1);
  (void)!::write(2, current_input, std::strlen(current_input));
  (void)!::write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::signal(SIGABRT, NameInputAndDie);
  std::signal(SIGSEGV, NameInputAndDie);
  using optstate::fuzz::Registry;
  std::map<std::string, size_t> inputs;
  for (auto& [name, fn] : Registry()) inputs[name] = 0;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    for (const fs::directory_entry& dir : fs::directory_iterator(argv[i], ec)) {
      if (!dir.is_directory()) continue;
      std::string target = dir.path().filename().string();
      auto fn = Registry().find(target);
      if (fn == Registry().end()) {
        std::fprintf(stderr, "%s: no fuzz target named '%s'\n", dir.path().c_str(), target.c_str());
        return 1;
      }
      std::vector<fs::path> files;
      for (const fs::directory_entry& f : fs::recursive_directory_iterator(dir.path())) {
        if (f.is_regular_file()) files.push_back(f.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        std::ifstream in(f, std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::snprintf(current_input, sizeof current_input, "%s", f.c_str());
        fn->second(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        ++inputs[target];
      }
    }
    if (ec) {
      std::fprintf(stderr, "%s: %s\n", argv[i], ec.message().c_str());
      return 1;
    }
  }
  int missing = 0;
  for (auto& [name, n] : inputs) {
    std::printf("%-14s %zu inputs\n", name.c_str(), n);
    if (n == 0) ++missing;
  }
  if (missing) std::fprintf(stderr, "%d targets got no input\n", missing);
  return missing ? 1 : 0;
}
