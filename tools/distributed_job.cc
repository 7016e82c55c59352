#include "distributed_job.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "interrupt_cleanup.h"
#include "optstate/dcp.h"
#include "optstate/file_io.h"

namespace optstate::tools {
namespace {

// A process cut off from the store can be stuck inside a request to it, which
// TCP retries for minutes, after its coordinator has already named the fault.
// If the run has not ended a few seconds after that, this says the fault,
// removes the temporary outputs and ends the process (exit 2) from here.
class EndRunStuckOnFault {
 public:
  EndRunStuckOnFault(const Coordinator& c, std::function<void(const std::string&)> report)
      : thread_([this, &c, report = std::move(report)] {
          std::unique_lock<std::mutex> lock(mutex_);
          auto seen = std::chrono::steady_clock::time_point::max();
          while (!done_) {
            ready_.wait_for(lock, std::chrono::milliseconds(200));
            if (done_) return;
            std::string fault = c.Fault();
            if (fault.empty()) continue;
            const auto now = std::chrono::steady_clock::now();
            if (seen == std::chrono::steady_clock::time_point::max()) seen = now;
            if (now - seen > std::chrono::seconds(3)) {
              report(fault);
              RemoveTemporaryOutputs();
              std::_Exit(kExitError);
            }
          }
        }) {}
  ~EndRunStuckOnFault() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    ready_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  bool done_ = false;  // under mutex_
  std::thread thread_;
};

}  // namespace

int RunJob(const DistributedJob& job, CommandOutput& output, const std::function<Status()>& open,
           const std::function<Status(Coordinator*)>& work) {
  std::unique_ptr<Coordinator> coordinator;
  if (job.distributed) {
    auto connected = ConnectCoordinator(job.name);
    if (!connected.ok()) return ReportError(output, job.command, connected.status(), job.json);
    coordinator = std::move(*connected);
    TellOthersOnInterrupt([c = coordinator.get()](int sig) {
      c->Abort("process " + std::to_string(c->rank()) + " of " + std::to_string(c->size()) + " was interrupted (" +
               "SIG" + sigabbrev_np(sig) + ")");
    });
  }
  // Before the coordinator goes, whichever way this returns.
  struct Untell {
    bool on;
    ~Untell() {
      if (on) TellOthersOnInterrupt({});
    }
  } untell{coordinator != nullptr};
  // A fault another process's silence or abort caused cancels this one's work
  // (Coordinator::Fault): that, not "cancelled", is what to say.
  auto failed = [&](const Status& status) {
    std::string fault = coordinator ? coordinator->Fault() : std::string();
    return ReportError(output, job.command, fault.empty() ? status : IoError(fault), job.json);
  };
  std::optional<EndRunStuckOnFault> end_if_stuck;
  if (coordinator) {
    end_if_stuck.emplace(*coordinator, [&](const std::string& fault) {
      ReportError(output, job.command, IoError(fault), job.json);
      output.out.flush();
      output.err.flush();
    });
  }
  Status opened = open();
  Status ready = coordinator ? AgreeToStart(*coordinator, opened) : opened;
  if (!ready.ok()) return failed(ready);
  Status worked = work(coordinator.get());
  if (!worked.ok()) return failed(worked);
  return kExitOk;
}

}  // namespace optstate::tools
