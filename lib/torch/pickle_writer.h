// Writes an object graph (as read by the pickle VM and torch layer) back as
// torch.save's data.pkl: protocol 2, tensors as _rebuild_tensor_v2 calls on
// persistent storage ids ('storage', torch.XStorage, key, 'cpu', numel),
// OrderedDict / torch.Size / bytes / sets as torch's own pickler spells them.
// Objects reached more than once are memoized, so shared storages and shared
// containers stay shared. Opcodes are limited to the set torch 2.6's
// weights_only unpickler accepts; globals it would refuse can only come from the
// input and are listed in `unsafe_globals`.
#ifndef OPTSTATE_PICKLE_WRITER_H_
#define OPTSTATE_PICKLE_WRITER_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/checkpoint.h"

namespace optstate {

struct PickleOutput {
  std::string bytes;                        // the data.pkl record
  std::vector<size_t> storages;             // output key "i" -> input storage index
  std::vector<std::string> unsafe_globals;  // module.name not on the weights_only allowlist
  // unsafe_globals is not empty and holds only DTensor classes, which torch 2.6
  // allowlists once torch.distributed.tensor is imported.
  bool only_dtensor_globals_unsafe = false;
};

// Takes the pickle a piece (about a megabyte) at a time, in order.
using PickleSink = std::function<Status(std::string_view piece)>;

// kUnsupported for objects that cannot be written back faithfully yet
// (self-containing objects). DTensors are written as the call that built them.
StatusOr<PickleOutput> WriteTorchPickle(const Checkpoint& checkpoint, NodeId root);
// The same, the bytes handed to `sink` as they are made instead of held in
// `bytes` (which stays empty): a pickle of ~12 bytes a node is never whole in
// memory. A sink error stops the writing and is returned.
StatusOr<PickleOutput> WriteTorchPickle(const Checkpoint& checkpoint, NodeId root, const PickleSink& sink);

}  // namespace optstate

#endif  // OPTSTATE_PICKLE_WRITER_H_
