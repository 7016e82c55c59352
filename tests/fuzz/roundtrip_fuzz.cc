// Parse -> write -> parse: whatever optstate reads and agrees to write must
// read back as the same object (tensor values included). Refusals to write
// (self-containing objects) are fine; a different object is a bug.
#include <vector>

#include "fuzz_target.h"
#include "graph_signature.h"
#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "optstate/checkpoint_writer.h"
#include "optstate/file_io.h"
#include "torch/container.h"

namespace {

class MemoryOutput : public optstate::OutputStream {
 public:
  optstate::Status Write(optstate::ByteSpan data) override {
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return optstate::Status();
  }
  uint64_t position() const override { return bytes_.size(); }
  optstate::Status Commit() override { return optstate::Status(); }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace

OPTSTATE_FUZZ_TARGET(roundtrip) {
  using namespace optstate;
  ByteSpan in = fuzz::Bytes(data, size);
  ReadOptions options;
  options.pickle.max_nodes = 1u << 16;
  StatusOr<Checkpoint> first = ParseCheckpoint(ByteCursor(in), options);
  if (!first.ok() || first->graph.root == kNoNode) return 0;
  uint64_t total = 0;
  for (const StorageRef& s : first->storages) total += s.nbytes;
  if (total > (16u << 20)) return 0;  // declared sizes are checked against the input; this keeps copies small
  MemoryOutput out;
  StorageSource source = [&](size_t i) { return StorageBytes(in, *first, first->storages[i]); };
  StatusOr<WriteReport> written = WriteEmbeddedCheckpoint(*first, first->graph.root, out, source);
  if (!written.ok()) return 0;
  ByteSpan again_bytes(out.bytes().data(), out.bytes().size());
  StatusOr<Checkpoint> again = ParseCheckpoint(ByteCursor(again_bytes), options);
  if (!again.ok()) fuzz::FuzzCheckFailed("our own output does not parse: " + again.status().ToString());
  std::string a = fuzz::GraphSignature(*first, in).Of(first->graph.root);
  std::string b = fuzz::GraphSignature(*again, again_bytes).Of(again->graph.root);
  if (a != b) fuzz::FuzzCheckFailed("the object changed in the round trip:\n  " + a + "\n  " + b);
  return 0;
}
