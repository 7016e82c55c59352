// A DeepSpeed ZeRO tag directory with one file replaced by the input: read,
// laid out, and when the layout holds, consolidated and the result read back.
//
// The first byte picks the directory (real DeepSpeed 0.16.4 saves of stage 2
// and stage 3, testdata/frameworks/) and which of its files the rest of the
// input replaces; the seeds are those files themselves, so mutations start
// from real ZeRO pickles (groups, fragments, paddings, partition counts). The
// directories are copied once per process into a scratch directory; each input
// writes its file there and puts the original back afterwards.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "optstate/checkpoint.h"
#include "optstate/zero.h"

namespace {

namespace fs = std::filesystem;

struct ZeroDir {
  std::string dir;                 // the scratch copy of the tag directory
  std::vector<std::string> files;  // its files, sorted
  std::vector<std::string> originals;
};

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const char* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
}

std::string& Scratch() {
  static std::string scratch =
      (fs::temp_directory_path() / ("optstate-zero-fuzz-" + std::to_string(::getpid()))).string();
  return scratch;
}

void RemoveScratch() {
  std::error_code ec;
  fs::remove_all(Scratch(), ec);
}

std::vector<ZeroDir>& Dirs() {
  static std::vector<ZeroDir> dirs = [] {
    std::vector<ZeroDir> out;
    const fs::path scratch = Scratch();
    std::atexit(RemoveScratch);
    for (const char* stage : {"zero2", "zero3"}) {
      const fs::path from = fs::path("testdata/frameworks/deepspeed_0.16.4") / stage / "global_step3";
      std::error_code ec;
      if (!fs::is_directory(from, ec)) continue;
      ZeroDir d;
      d.dir = (scratch / stage / "global_step3").string();
      fs::create_directories(d.dir, ec);
      for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) d.files.push_back(e.path().filename());
      std::sort(d.files.begin(), d.files.end());
      for (const std::string& f : d.files) {
        d.originals.push_back(ReadAll(from / f));
        WriteAll(d.dir + "/" + f, d.originals.back().data(), d.originals.back().size());
      }
      out.push_back(std::move(d));
    }
    if (out.empty()) optstate::fuzz::FuzzCheckFailed("no ZeRO fixture under testdata/frameworks (run from the repository)");
    return out;
  }();
  return dirs;
}

}  // namespace

OPTSTATE_FUZZ_TARGET(zero_dir) {
  using namespace optstate;
  if (size < 1) return 0;
  std::vector<ZeroDir>& dirs = Dirs();
  ZeroDir& d = dirs[(data[0] >> 4) % dirs.size()];
  const size_t which = (data[0] & 0x0F) % d.files.size();
  const std::string path = d.dir + "/" + d.files[which];
  WriteAll(path, reinterpret_cast<const char*>(data + 1), size - 1);

  ReadOptions read;
  read.pickle.max_nodes = 1u << 20;
  StatusOr<std::unique_ptr<ZeroCheckpoint>> zero = OpenZeroCheckpoint(d.dir, read);
  if (zero.ok() && (*zero)->ok()) {
    const std::string out = d.dir + "/../consolidated.pt";
    ZeroConsolidateOptions options;
    options.write.durability = Durability::kUnsynced;
    StatusOr<ZeroConsolidateReport> report = ConsolidateZero(**zero, out, options);
    if (report.ok()) {
      StatusOr<std::unique_ptr<CheckpointFile>> back = OpenCheckpoint(out);
      if (!back.ok()) fuzz::FuzzCheckFailed("consolidated file unreadable: " + back.status().ToString());
      std::error_code ec;
      fs::remove(out, ec);
    }
  }
  WriteAll(path, d.originals[which].data(), d.originals[which].size());
  return 0;
}
