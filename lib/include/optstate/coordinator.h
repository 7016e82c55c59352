// Several processes doing one job together (reshard or export under torchrun or
// srun, possibly on several machines): who this process is, and one way to
// exchange small messages. The library uses only this interface; the
// implementation over LibTorch's c10d TCPStore is in lib/libtorch/, so code
// that runs alone never loads LibTorch.
#ifndef OPTSTATE_COORDINATOR_H_
#define OPTSTATE_COORDINATOR_H_

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

}  // namespace optstate

#endif  // OPTSTATE_COORDINATOR_H_
