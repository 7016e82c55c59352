// The whole inspect pipeline on a file's bytes: container, pickle, torch
// objects, security findings, optimizer state and the report with its step
// reads.
#include "fuzz_target.h"
#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "optstate/inspect_report.h"
#include "optstate/params.h"
#include "torch/container.h"

OPTSTATE_FUZZ_TARGET(inspect) {
  using namespace optstate;
  ByteSpan bytes = fuzz::Bytes(data, size);
  ReadOptions options;
  options.pickle.max_nodes = 1u << 20;
  options.resolve_offsets = true;
  options.verify_crc = size < (1u << 16);
  StatusOr<Checkpoint> cp = ParseCheckpoint(ByteCursor(bytes), options);
  if (!cp.ok()) return 0;
  TensorBytesReader read = [&](const TensorRef& t) { return ReadTensorBytes(bytes, *cp, t); };
  InspectReportOptions report;
  report.max_step_reads = 4;
  (void)BuildInspectReport(*cp, read, report);
  for (const std::string& path : FindOptimizerStates(*cp)) (void)ReadOptimizerState(*cp, path);
  return 0;
}
