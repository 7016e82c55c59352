#include "optstate/coordinator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>


#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "optstate/file_io.h"

namespace optstate {
namespace {

std::string BeatKey(const std::string& job, int rank) {
  return "optstate/" + job + "/beat/" + std::to_string(rank);
}

// The heartbeat: a counter in the store this process adds 1 to every second,
// on a connection and a thread of its own, so that a process busy writing
// still shows it is alive. The same thread watches, between exchanges: rank 0
// every other process's counter, the others rank 0's (under torchrun the
// store outlives rank 0), and everyone the abort key. A process that stood
// still for heartbeat_timeout without having said it is done, or an abort,
// is a fault: recorded, told to the others through the abort key, and this
// process's work cancelled (RequestCancellation) so it stops at its next
// write instead of finishing work nobody can use. The thread is detached and
// holds only this state: a beat stuck in a request to a stalled store outlives
// the coordinator harmlessly.
struct Heartbeat {
  c10::intrusive_ptr<c10d::TCPStore> store;
  TcpStoreEndpoint endpoint;
  std::atomic<bool> stop{false};
  // When the store last answered this process's beat (steady clock, ns).
  std::atomic<int64_t> answered_at{Now()};
  std::mutex mutex;
  std::string fault;  // under mutex

  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  std::string Key(const std::string& what) const { return "optstate/" + endpoint.job + "/" + what; }
  // Records the first fault (a later one is dropped) and cancels this process's work.
  void SetFault(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!fault.empty()) return;
      fault = "c10d store at " + endpoint.host + ":" + std::to_string(endpoint.port) + ": " + why;
    }
    RequestCancellation();
  }
};

// The other half of the heartbeat, which needs no network: a process cut off
// from the store (its link down, the store's host gone without a word) sends
// its beat into a connection that never answers, and would wait on it and on
// every later request for the whole TCP timeout. This thread sees the beat go
// unanswered for heartbeat_timeout and records the fault, naming this process.
void WatchStoreAnswers(std::shared_ptr<Heartbeat> beat) {
  const TcpStoreEndpoint& e = beat->endpoint;
  const int64_t limit = std::chrono::duration_cast<std::chrono::nanoseconds>(e.heartbeat_timeout).count();
  while (!beat->stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if (!beat->stop.load() && Heartbeat::Now() - beat->answered_at.load() > limit) {
      beat->SetFault("process " + std::to_string(e.rank) + " of " + std::to_string(e.size) +
                     " (this one) has had no answer from the store for " +
                     std::to_string(e.heartbeat_timeout.count()) + " s (its network or the store's host is down)");
      return;
    }
  }
}

void Beat(std::shared_ptr<Heartbeat> beat) {
  const TcpStoreEndpoint& e = beat->endpoint;
  std::vector<int> watched;
  for (int r = 0; r < e.size; ++r) {
    if (r != e.rank && (e.rank == 0 || r == 0)) watched.push_back(r);
  }
  std::vector<int64_t> counts(e.size, -1);
  std::vector<std::chrono::steady_clock::time_point> seen(e.size, std::chrono::steady_clock::now());
  try {
    while (!beat->stop.load()) {
      beat->store->add(beat->Key("beat/" + std::to_string(e.rank)), 1);
      beat->answered_at.store(Heartbeat::Now());
      std::string fault;
      const std::vector<std::string> abort_key{beat->Key("abort")};
      if (beat->store->check(abort_key)) {
        std::vector<uint8_t> why = beat->store->get(abort_key[0]);
        fault.assign(why.begin(), why.end());
      }
      const auto now = std::chrono::steady_clock::now();
      for (int r : watched) {
        if (!fault.empty() || beat->store->check({beat->Key("exit/" + std::to_string(r))})) continue;
        int64_t count = beat->store->add(beat->Key("beat/" + std::to_string(r)), 0);
        if (count != counts[r]) {
          counts[r] = count;
          seen[r] = now;
        } else if (count > 0 && now - seen[r] > e.heartbeat_timeout) {
          fault = "process " + std::to_string(r) + " of " + std::to_string(e.size) +
                  " stopped answering: no heartbeat for " + std::to_string(e.heartbeat_timeout.count()) +
                  " s (killed, out of memory, or its host or network is down)";
          beat->store->set(abort_key[0], std::vector<uint8_t>(fault.begin(), fault.end()));
        }
      }
      if (!fault.empty() && !beat->stop.load()) {
        beat->SetFault(fault);
        return;
      }
      for (int i = 0; i < 10 && !beat->stop.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const std::exception&) {
    // The store is gone: the next exchange says so.
  }
}

// How long rank 0, serving the store, keeps it after a fault (see the destructor).
constexpr auto kServerLingerOnFault = std::chrono::seconds(2);

class TcpStoreCoordinator : public Coordinator {
 public:
  TcpStoreCoordinator(const TcpStoreEndpoint& e, c10::intrusive_ptr<c10d::TCPStore> store,
                      c10::intrusive_ptr<c10d::TCPStore> abort_store, c10::intrusive_ptr<c10d::TCPStore> beat_store)
      : endpoint_(e), store_(std::move(store)), abort_store_(std::move(abort_store)),
        heartbeat_(std::make_shared<Heartbeat>()) {
    heartbeat_->store = std::move(beat_store);
    heartbeat_->endpoint = e;
    std::thread(Beat, heartbeat_).detach();
    std::thread(WatchStoreAnswers, heartbeat_).detach();
  }

  // Rank 0 may be the store's server: it stays until every other process has
  // said it is done reading, or the others' last reads would find it gone.
  ~TcpStoreCoordinator() override {
    // A failed job says goodbye to nobody: the store may be the thing that
    // failed, and a request to an unreachable one would wait for minutes.
    if (!Fault().empty()) {
      heartbeat_->stop.store(true);
      // But the store's server keeps it up a moment longer: the others learn
      // the fault from its abort key (waiting processes look every 0.1 s, busy
      // ones' heartbeat every second), and once it is gone they can only say
      // "Broken pipe", not which process failed.
      if (endpoint_.rank == 0 && !endpoint_.agent_store) std::this_thread::sleep_for(kServerLingerOnFault);
      return;
    }
    try {
      std::string prefix = "optstate/" + endpoint_.job + "/exit/";
      if (endpoint_.rank != 0) {
        store_->set(prefix + std::to_string(endpoint_.rank), {1});  // before the beats stop
      } else {
        std::vector<std::string> keys;
        for (int r = 1; r < endpoint_.size; ++r) keys.push_back(prefix + std::to_string(r));
        if (!keys.empty()) (void)WaitFor(keys, std::chrono::seconds(60));
      }
    } catch (const std::exception&) {
      // Leaving anyway: a process that is gone cannot be waited for.
    }
    heartbeat_->stop.store(true);
  }

  int rank() const override { return endpoint_.rank; }
  int size() const override { return endpoint_.size; }

  StatusOr<std::vector<std::string>> AllGather(const std::string& step, const std::string& mine) override {
    try {
      std::string prefix = "optstate/" + endpoint_.job + "/" + step + "/";
      store_->set(prefix + std::to_string(endpoint_.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
      std::vector<std::string> keys;
      for (int r = 0; r < endpoint_.size; ++r) keys.push_back(prefix + std::to_string(r));
      Status arrived = WaitFor(keys, endpoint_.timeout);
      if (!arrived.ok()) return arrived.WithContext(Where(step));
      std::vector<std::string> all;
      for (const std::string& k : keys) {
        std::vector<uint8_t> v = store_->get(k);
        all.emplace_back(v.begin(), v.end());
      }
      return all;
    } catch (const std::exception& e) {
      return IoError(Where(step) + ": " + e.what());
    }
  }

  std::string Fault() const override {
    std::lock_guard<std::mutex> lock(heartbeat_->mutex);
    return heartbeat_->fault;
  }

  void Abort(const std::string& why) override {
    try {
      abort_store_->set(AbortKey(), std::vector<uint8_t>(why.begin(), why.end()));
    } catch (const std::exception&) {
      // The store is gone too: the others find out from that.
    }
  }

 private:
  std::string AbortKey() const { return "optstate/" + endpoint_.job + "/abort"; }
  std::string Where(const std::string& step) const {
    return "c10d store at " + endpoint_.host + ":" + std::to_string(endpoint_.port) + ", step '" + step + "'";
  }

  // Until every key is set, another process has aborted, a process that is
  // waited for has stopped beating (keys[r] is process r's), or the timeout.
  // Polls with check() rather than blocking in TCPStore::wait: a wait cannot
  // also watch the abort key, so one interrupted process would leave the rest
  // waiting for it for the whole timeout. Throws what the store throws.
  Status WaitFor(const std::vector<std::string>& keys, std::chrono::seconds timeout) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout;
    auto pause = std::chrono::milliseconds(1);
    const std::vector<std::string> abort_key{AbortKey()};
    std::vector<int64_t> beats(keys.size(), -1);  // last count seen
    std::vector<std::chrono::steady_clock::time_point> beat_seen(keys.size(), start);
    auto next_look = start + std::chrono::seconds(1);
    while (!store_->check(keys)) {
      if (store_->check(abort_key)) {
        std::vector<uint8_t> why = store_->get(abort_key[0]);
        return IoError(std::string(why.begin(), why.end()));
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_look) {
        next_look = now + std::chrono::seconds(1);
        for (size_t r = 0; r < keys.size(); ++r) {
          if (static_cast<int>(r) == endpoint_.rank || store_->check({keys[r]})) continue;
          int64_t count = store_->add(BeatKey(endpoint_.job, static_cast<int>(r)), 0);
          if (count != beats[r]) {
            beats[r] = count;
            beat_seen[r] = now;
          } else if (count > 0 && now - beat_seen[r] > endpoint_.heartbeat_timeout) {
            // A process that never beat at all may still be starting: the timeout decides.
            return IoError("process " + std::to_string(r) + " of " + std::to_string(endpoint_.size) +
                           " stopped answering: no heartbeat for " +
                           std::to_string(endpoint_.heartbeat_timeout.count()) +
                           " s (killed, out of memory, or its host or network is down)");
          }
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::string missing;
        for (size_t r = 0; r < keys.size(); ++r) {
          if (!store_->check({keys[r]})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
        return IoError("no word from process(es) " + missing + " of " + std::to_string(endpoint_.size) +
                       " after " + std::to_string(timeout.count()) + " s");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(100));
    }
    return Status();
  }

  TcpStoreEndpoint endpoint_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  // A connection of its own for Abort, which runs on another thread while the
  // main thread may be stopped half-way through a request on store_ (a signal
  // arrives during a check() in WaitFor): a second request on that socket
  // would read the first one's reply, or wait for one that never comes, and
  // the others would never hear of the abort.
  c10::intrusive_ptr<c10d::TCPStore> abort_store_;
  std::shared_ptr<Heartbeat> heartbeat_;
};

}  // namespace

StatusOr<std::unique_ptr<Coordinator>> ConnectTcpStore(const TcpStoreEndpoint& e) {
  if (e.size < 1 || e.rank < 0 || e.rank >= e.size) {
    return InvalidArgumentError("rank " + std::to_string(e.rank) + " of " + std::to_string(e.size) + " processes");
  }
  try {
    c10d::TCPStoreOptions options;
    options.port = e.port;
    options.isServer = !e.agent_store && e.rank == 0;
    options.numWorkers = e.agent_store ? c10::nullopt : c10::optional<std::size_t>(e.size);
    options.waitWorkers = false;
    options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(e.timeout);
    options.multiTenant = e.agent_store;
    auto store = c10::make_intrusive<c10d::TCPStore>(e.host, options);
    c10d::TCPStoreOptions client = options;
    client.isServer = false;
    client.numWorkers = c10::nullopt;
    auto abort_store = c10::make_intrusive<c10d::TCPStore>(e.host, client);
    auto beat_store = c10::make_intrusive<c10d::TCPStore>(e.host, client);
    return std::unique_ptr<Coordinator>(
        new TcpStoreCoordinator(e, std::move(store), std::move(abort_store), std::move(beat_store)));
  } catch (const std::exception& ex) {
    return IoError("cannot reach the c10d store at " + e.host + ":" + std::to_string(e.port) + " as rank " +
                   std::to_string(e.rank) + " of " + std::to_string(e.size) + ": " + ex.what());
  }
}

}  // namespace optstate
