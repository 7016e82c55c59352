#include "each_checkpoint.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "shared_flags.h"

namespace optstate::tools {
namespace {

// One checkpoint's run, as the command alone on its path would have printed it.
struct CheckedOne {
  std::string out;
  std::string err;
  int exit_code = kExitOk;
  bool done = false;
};

// Runs `run_one` on each path, `jobs` at a time, and hands each result to
// `emit` in path order as soon as it and every one before it are done (the
// caller's thread emits; results are dropped once emitted).
void CheckInOrder(const std::vector<std::string>& paths, unsigned jobs,
                  const std::function<int(const std::string&, CommandOutput&)>& run_one,
                  const std::function<void(size_t, const CheckedOne&)>& emit) {
  std::vector<CheckedOne> results(paths.size());
  std::mutex mutex;
  std::condition_variable finished;
  size_t next = 0;
  auto work = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (next == paths.size()) return;
        i = next++;
      }
      std::ostringstream out, err;
      CommandOutput captured{out, err};
      const int code = run_one(paths[i], captured);
      std::lock_guard<std::mutex> lock(mutex);
      results[i] = {out.str(), err.str(), code, true};
      finished.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < jobs; ++t) threads.emplace_back(work);
  for (size_t i = 0; i < paths.size(); ++i) {
    CheckedOne r;
    {
      std::unique_lock<std::mutex> lock(mutex);
      finished.wait(lock, [&] { return results[i].done; });
      r = std::move(results[i]);
      results[i] = CheckedOne{{}, {}, kExitOk, true};
    }
    emit(i, r);
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace

void AddEachFlags(CLI::App& cmd, bool& each, unsigned& jobs, std::string_view each_help, std::string_view what) {
  cmd.add_flag("--each", each, std::string(each_help));
  cmd.add_option("-j,--jobs", jobs, "With --each: checkpoints " + std::string(what) + " at once (default: one per core)")
      ->check(CLI::Range(1u, 1024u));
}

int RunEach(const EachOptions& o, CommandOutput& output,
            const std::function<int(const std::string& path, CommandOutput& output)>& run_one) {
  auto found = FindCheckpoints(o.paths, o.find);
  if (!found.ok()) return ReportError(output, o.command, found.status(), o.json);
  const std::vector<std::string>& paths = found->checkpoints;
  if (paths.empty()) {
    return ReportError(output, o.command, NotFoundError("no checkpoint under " + FirstNames(o.paths)), o.json);
  }
  unsigned jobs = o.jobs != 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, paths.size()));

  using J = nlohmann::ordered_json;
  J checked = J::array();
  size_t passed = 0;
  std::vector<std::string> failed, unread;
  int exit_code = kExitOk;
  bool wrote_report = false;
  CheckInOrder(paths, jobs, run_one, [&](size_t i, const CheckedOne& r) {
    passed += r.exit_code == kExitOk;
    if (r.exit_code == kExitFindings) failed.push_back(paths[i]);
    if (r.exit_code == kExitError) unread.push_back(paths[i]);
    exit_code = std::max(exit_code, r.exit_code);  // the exit codes rank ok < findings < error
    if (o.json) {
      // Each run wrote one JSON document (its report, or an error document).
      J result = J::parse(r.out, nullptr, /*allow_exceptions=*/false);
      if (result.is_discarded()) result = r.out;
      checked.push_back({{"path", paths[i]}, {"exit_code", r.exit_code}, {"result", std::move(result)}});
      return;
    }
    if (wrote_report && !r.out.empty()) output.out << "\n";
    wrote_report |= !r.out.empty();
    output.out << r.out << std::flush;
    output.err << r.err << std::flush;
  });
  if (o.json) {
    WriteJson(output, {{"passed", exit_code == kExitOk},
                       {"checkpoints", checked},
                       {"summary", {{"checkpoints", paths.size()}, {"passed", passed}, {"failed", failed.size()},
                                    {"unreadable", unread.size()}}},
                       {"skipped", found->skipped},
                       {"empty_directories", found->empty_directories}});
    return exit_code;
  }
  output.out << "\n" << paths.size() << (paths.size() == 1 ? " checkpoint: " : " checkpoints: ") << passed
             << (o.gate ? " passed, " + std::to_string(failed.size()) + " FAILED, " : " read, ") << unread.size()
             << " could not be read";
  if (!found->skipped.empty()) output.out << "; " << found->skipped.size() << " other files not checkpoints";
  output.out << "\n";
  for (const std::string& path : failed) output.out << "  FAILED: " << path << "\n";
  for (const std::string& path : unread) output.out << "  could not be read: " << path << "\n";
  for (const std::string& dir : found->empty_directories) output.out << "  no checkpoint in " << dir << "\n";
  return exit_code;
}

}  // namespace optstate::tools
