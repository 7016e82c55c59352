// A canonical text of an object graph for the round-trip target: what a
// reader sees (kinds, values, globals, containers, tensors with their storage
// bytes' CRC), not how the pickle spelled it (memo, protocol, opcodes).
#ifndef OPTSTATE_TESTS_FUZZ_GRAPH_SIGNATURE_H_
#define OPTSTATE_TESTS_FUZZ_GRAPH_SIGNATURE_H_

#include <cstring>
#include <string>
#include <unordered_set>

#include "io/crc32.h"
#include "optstate/checkpoint.h"

namespace optstate::fuzz {

class GraphSignature {
 public:
  GraphSignature(const Checkpoint& cp, ByteSpan bytes) : cp_(cp), bytes_(bytes) {}

  std::string Of(NodeId id) {
    out_.clear();
    Walk(id, 0);
    return out_;
  }

 private:
  void Walk(NodeId id, int depth) {
    if (id == kNoNode) return out_.append("-"), void();
    if (depth > 200 || !on_path_.insert(id).second) return out_.append("^"), void();  // deep or cyclic
    const Node& n = cp_.graph.at(id);
    out_.append(std::to_string(static_cast<int>(n.kind))).append("(");
    switch (n.kind) {
      case NodeKind::kBool: out_.append(n.bool_value ? "T" : "F"); break;
      case NodeKind::kInt: out_.append(std::to_string(n.int_value)); break;
      case NodeKind::kFloat: {
        uint64_t bits;
        std::memcpy(&bits, &n.float_value, 8);
        out_.append(std::to_string(bits));
        break;
      }
      case NodeKind::kBigInt:
      case NodeKind::kStr:
      case NodeKind::kBytes: out_.append(std::to_string(n.text.size())).append(":").append(n.text); break;
      case NodeKind::kGlobal: out_.append(n.module()).append(".").append(n.name()); break;
      case NodeKind::kTensor: Tensor(cp_.tensors[n.tensor]); break;
      default: break;
    }
    out_.append(n.class_name()).append("|");
    for (NodeId c : n.items) Walk(c, depth + 1), out_.append(",");
    for (auto [k, v] : n.entries) Walk(k, depth + 1), out_.append(":"), Walk(v, depth + 1), out_.append(",");
    if (n.kind == NodeKind::kObject) {
      Walk(n.callable(), depth + 1), Walk(n.args(), depth + 1), Walk(n.kwargs(), depth + 1), Walk(n.state(), depth + 1);
    }
    out_.append(")");
    on_path_.erase(id);
  }

  void Tensor(const TensorRef& t) {
    out_.append(GetDTypeInfo(t.dtype).name).append("[");
    for (int64_t s : t.sizes) out_.append(std::to_string(s)).append(",");
    out_.append("]");
    StatusOr<std::vector<std::byte>> b = ReadTensorBytes(bytes_, cp_, t);
    out_.append(b.ok() ? std::to_string(Crc32(ByteSpan(b->data(), b->size()))) : "unreadable");
  }

  const Checkpoint& cp_;
  ByteSpan bytes_;
  std::string out_;
  std::unordered_set<NodeId> on_path_;
};

}  // namespace optstate::fuzz

#endif  // OPTSTATE_TESTS_FUZZ_GRAPH_SIGNATURE_H_
