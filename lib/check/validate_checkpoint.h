// The validate rules that need only the checkpoint (validate_checkpoint.cc).
#ifndef OPTSTATE_CHECK_VALIDATE_CHECKPOINT_H_
#define OPTSTATE_CHECK_VALIDATE_CHECKPOINT_H_

#include <string>
#include <vector>

#include "check/finding_sink.h"
#include "check/value_scan.h"
#include "optstate/checkpoint.h"
#include "optstate/inspect_report.h"
#include "optstate/params.h"
#include "zip/zip_archive.h"

namespace optstate {

// Security findings, then every optimizer state's keys, param_groups, steps and
// lr, then (when the options scan values) the values of every state tensor and
// the CRCs of `records`. Tensors are read through `read`; with `file` (a mapped
// torch.save file), contiguous ones are counted where they lie instead, in the
// same sweep as the records. `file` may be null (a DCP directory). `swept`
// (optional): records already swept while the file was opened, not read again.
void CheckCheckpointRules(const Checkpoint& checkpoint, const TensorBytesReader& read, const CheckpointFile* file,
                          const std::vector<const ZipEntry*>& records, FindingSink& sink,
                          const SweptRecords* swept = nullptr);

// The security findings of a checkpoint (or of what could be scanned of an
// unreadable file), under validate's rule ids; globals the rules file
// allowlists are counted in the report instead.
void AddSecurityFindings(const std::vector<Finding>& findings, FindingSink& sink);

// state-tensors-alias for state tensors of `state` that share bytes (each
// reported with the one it overlaps), state-step-shared for one step tensor
// serving several entries; `at` prefixes the paths. state_aliasing.cc.
void CheckStateAliasing(const Checkpoint& checkpoint, const OptimizerState& state, const std::string& at,
                        FindingSink& sink);

// crc-mismatch for records whose CRC-32 differs from `scan`'s (what the value
// sweep summed, in `records`' order); CRC 0, which torch writes where it
// computed none, is crc-not-recorded, or tensor-data-skipped when every
// storage record is zeros (torch.serialization.skip_data()). record_crcs.cc.
void ReportRecordCrcs(const Checkpoint& checkpoint, const std::vector<const ZipEntry*>& records,
                      const std::vector<ScanRecord>& scan, FindingSink& sink);

}  // namespace optstate

#endif  // OPTSTATE_CHECK_VALIDATE_CHECKPOINT_H_
