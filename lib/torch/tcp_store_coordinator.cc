#include "optstate/torch/tcp_store_coordinator.h"

#include <exception>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace optstate {
namespace {

class TcpStoreCoordinator : public Coordinator {
 public:
  TcpStoreCoordinator(const TcpStoreEndpoint& e, c10::intrusive_ptr<c10d::TCPStore> store)
      : endpoint_(e), store_(std::move(store)) {}

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
      if (!keys.empty()) store_->wait(keys, std::chrono::milliseconds(60000));
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
      store_->wait(keys, std::chrono::duration_cast<std::chrono::milliseconds>(endpoint_.timeout));
      std::vector<std::string> all;
      for (const std::string& k : keys) {
        std::vector<uint8_t> v = store_->get(k);
        all.emplace_back(v.begin(), v.end());
      }
      return all;
    } catch (const std::exception& e) {
      return IoError("c10d store at " + endpoint_.host + ":" + std::to_string(endpoint_.port) + ", step '" + step +
                     "': " + e.what());
    }
  }

 private:
  TcpStoreEndpoint endpoint_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
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
    return std::unique_ptr<Coordinator>(new TcpStoreCoordinator(e, std::move(store)));
  } catch (const std::exception& ex) {
    return IoError("cannot reach the c10d store at " + e.host + ":" + std::to_string(e.port) + " as rank " +
                   std::to_string(e.rank) + " of " + std::to_string(e.size) + ": " + ex.what());
  }
}

}  // namespace optstate
