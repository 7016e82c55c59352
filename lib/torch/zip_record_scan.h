// The records of a torch.save zip beside the data.pkl optstate reads, as the
// torch versions that read them otherwise see them: names torch's reader takes
// for one another (exact duplicates, case variants), every other record a
// reader could take for data.pkl, and a TorchScript archive's constants.pkl.
// Internal to lib/.
#ifndef OPTSTATE_LIB_ZIP_RECORD_SCAN_H_
#define OPTSTATE_LIB_ZIP_RECORD_SCAN_H_

#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "pickle/pickle_vm.h"

namespace optstate {

// Adds to out.findings: zip-duplicate-record, torchscript-archive, and the
// globals of every other data.pkl and of constants.pkl.
void ScanRecordsBesideTheMainPickle(const ByteCursor& whole, const PickleLimits& limits, Checkpoint& out);

}  // namespace optstate

#endif  // OPTSTATE_LIB_ZIP_RECORD_SCAN_H_
