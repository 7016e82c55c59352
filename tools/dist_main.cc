// optstate-dist: the optstate command line linked with LibTorch's c10d, for
// reshard and export run as several processes (--distributed) under torchrun,
// srun or any launcher that sets the usual variables. `optstate --distributed`
// hands over to this binary, so users only ever type `optstate`.
//
// Who is who: RANK and WORLD_SIZE (torchrun), else SLURM_PROCID and SLURM_NTASKS
// (srun). Where to meet: MASTER_ADDR and MASTER_PORT (torchrun sets both; under
// SLURM export them in the batch script). Under torchrun the agent's store is
// joined (TORCHELASTIC_USE_AGENT_STORE); otherwise rank 0 serves one.
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli_app.h"
#include "command.h"
#include "interrupt_cleanup.h"
#include "optstate/coordinator.h"

namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

optstate::StatusOr<int> EnvInt(const char* primary, const char* fallback) {
  const char* v = Env(primary);
  const char* name = primary;
  if (!v && fallback) {
    v = Env(fallback);
    name = fallback;
  }
  if (!v) {
    return optstate::InvalidArgumentError(std::string("--distributed: ") + primary +
                                          (fallback ? std::string(" (or ") + fallback + ")" : "") +
                                          " is not set; run under torchrun or srun, or set it");
  }
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > 1 << 20) {
    return optstate::InvalidArgumentError(std::string("--distributed: ") + name + "='" + v + "' is not a number");
  }
  return static_cast<int>(n);
}

optstate::StatusOr<std::unique_ptr<optstate::Coordinator>> Connect(const std::string& job) {
  optstate::TcpStoreEndpoint e;
  OPTSTATE_ASSIGN_OR_RETURN(e.rank, EnvInt("RANK", "SLURM_PROCID"));
  OPTSTATE_ASSIGN_OR_RETURN(e.size, EnvInt("WORLD_SIZE", "SLURM_NTASKS"));
  const char* host = Env("MASTER_ADDR");
  if (!host) return optstate::InvalidArgumentError("--distributed: MASTER_ADDR is not set (the host of rank 0)");
  e.host = host;
  OPTSTATE_ASSIGN_OR_RETURN(int port, EnvInt("MASTER_PORT", nullptr));
  if (port < 1 || port > 65535) return optstate::InvalidArgumentError("--distributed: MASTER_PORT out of range");
  e.port = static_cast<uint16_t>(port);
  const char* agent = Env("TORCHELASTIC_USE_AGENT_STORE");
  e.agent_store = agent && std::string(agent) == "True";
  const char* run = Env("TORCHELASTIC_RUN_ID") ? Env("TORCHELASTIC_RUN_ID") : Env("SLURM_JOB_ID");
  e.job = (run ? std::string(run) + "/" : std::string()) + job;
  return optstate::ConnectTcpStore(e);
}

}  // namespace

int main(int argc, char** argv) {
  optstate::tools::SetCoordinatorFactory(Connect);
  optstate::tools::RemoveOutputsOnInterrupt();
  return optstate::tools::RunCliOnStdStreams(argc, argv);
}
