// A Coordinator over LibTorch's c10d TCPStore: the key-value store torchrun
// already runs (or, under srun or a plain launcher, one that rank 0 serves) at
// MASTER_ADDR:MASTER_PORT. No networking of our own: messages are store keys.
#ifndef OPTSTATE_TORCH_TCP_STORE_COORDINATOR_H_
#define OPTSTATE_TORCH_TCP_STORE_COORDINATOR_H_

#include <chrono>
#include <memory>
#include <string>

#include "optstate/coordinator.h"

namespace optstate {

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

#endif  // OPTSTATE_TORCH_TCP_STORE_COORDINATOR_H_
