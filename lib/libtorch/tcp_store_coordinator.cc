#include "optstate/libtorch/tcp_store_coordinator.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace optstate {
namespace {

class TcpStoreCoordinator : public Coordinator {
 public:
  TcpStoreCoordinator(const TcpStoreEndpoint& e, c10::intrusive_ptr<c10d::TCPStore> store,
                      c10::intrusive_ptr<c10d::TCPStore> abort_store)
      : endpoint_(e), store_(std::move(store)), abort_store_(std::move(abort_store)) {}

  // Rank 0 may be the store's server: it stays until every other process has
  // said it is done reading, or the others' last reads would find it gone.
  ~TcpStoreCoordinator() override {
    try {
      std::string prefix = "optstate/" + endpoint_.job + "/exit/";
      if (endpoint_.rank != 0) {
        store_->set(prefix + std::to_string(endpoint_.rank), {1});
        return;
      }
      std::vector<std::string> keys;
      for (int r = 1; r < endpoint_.size; ++r) keys.push_back(prefix + std::to_string(r));
      if (!keys.empty()) (void)WaitFor(keys, std::chrono::seconds(60));
    } catch (const std::exception&) {
      // Leaving anyway: a process that is gone cannot be waited for.
    }
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

  // Until every key is set, another process has aborted, or the timeout.
  // Polls with check() rather than blocking in TCPStore::wait: a wait cannot
  // also watch the abort key, so one interrupted process would leave the rest
  // waiting for it for the whole timeout. Throws what the store throws.
  Status WaitFor(const std::vector<std::string>& keys, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    const std::vector<std::string> abort_key{AbortKey()};
    while (!store_->check(keys)) {
      if (store_->check(abort_key)) {
        std::vector<uint8_t> why = store_->get(abort_key[0]);
        return IoError(std::string(why.begin(), why.end()));
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
    return std::unique_ptr<Coordinator>(new TcpStoreCoordinator(e, std::move(store), std::move(abort_store)));
  } catch (const std::exception& ex) {
    return IoError("cannot reach the c10d store at " + e.host + ":" + std::to_string(e.port) + " as rank " +
                   std::to_string(e.rank) + " of " + std::to_string(e.size) + ": " + ex.what());
  }
}

}  // namespace optstate
