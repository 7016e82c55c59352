// Several processes doing one job together (reshard or export under torchrun or
// srun, possibly on several machines): who this process is, and one way to
// exchange small messages. The library uses only this interface; the
// implementation over LibTorch's c10d TCPStore (ConnectTcpStore, below) is in
// lib/libtorch/ and its own library, optstate_dist, so code that runs alone
// never loads LibTorch.
#ifndef OPTSTATE_COORDINATOR_H_
#define OPTSTATE_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optstate/status.h"

namespace optstate {

class Coordinator {
 public:
  virtual ~Coordinator() = default;
  virtual int rank() const = 0;  // 0 .. size() - 1; rank 0 coordinates
  virtual int size() const = 0;
  // Every process contributes `mine` under the name `step` (used once per job);
  // returns every contribution in rank order once all have arrived. This is
  // also the barrier: nobody returns before everybody has called it.
  virtual StatusOr<std::vector<std::string>> AllGather(const std::string& step, const std::string& mine) = 0;
  // This process is ending before the job does (interrupted): tell the others,
  // so that their next or current AllGather fails with `why` instead of
  // waiting for it until the timeout. Best effort; never throws.
  virtual void Abort(const std::string& why) { (void)why; }
  // Why the job cannot go on, when that was found out between exchanges (a
  // process stopped answering, another aborted), in which case this process's
  // own work was also cancelled (RequestCancellation, file_io.h) so that it
  // stops at its next write; "" otherwise. Say this rather than "cancelled".
  virtual std::string Fault() const { return {}; }
};

// A job of one process.
class SoloCoordinator : public Coordinator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  StatusOr<std::vector<std::string>> AllGather(const std::string&, const std::string& mine) override {
    return std::vector<std::string>{mine};
  }
};

// A Coordinator over LibTorch's c10d TCPStore: the key-value store torchrun
// already runs (or, under srun or a plain launcher, one that rank 0 serves) at
// MASTER_ADDR:MASTER_PORT. No networking of our own: messages are store keys.
// Defined only in optstate_dist, the library that links LibTorch.
struct TcpStoreEndpoint {
  int rank = 0;
  int size = 1;
  std::string host;        // MASTER_ADDR
  uint16_t port = 0;       // MASTER_PORT
  // torchrun's agent already serves the store on that port
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank connects as a client.
  // Otherwise rank 0 serves it.
  bool agent_store = false;
  std::string job;         // key prefix, so several jobs can share a store
  std::chrono::seconds timeout{1800};  // how long to wait for the slowest process
  // Each process adds to a counter in the store every second from a thread of
  // its own, busy or not. A process that is waited for and whose counter has
  // stood still this long is gone (SIGKILL, the OOM killer, its host or link):
  // the wait fails naming it instead of lasting the whole timeout.
  std::chrono::seconds heartbeat_timeout{10};
};

// Connects (rank 0 serving the store unless agent_store). Errors from c10d
// become kIoError with its message; none escapes as an exception.
StatusOr<std::unique_ptr<Coordinator>> ConnectTcpStore(const TcpStoreEndpoint& endpoint);

}  // namespace optstate

#endif  // OPTSTATE_COORDINATOR_H_
