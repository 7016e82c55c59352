#include "torch/legacy_format.h"

#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "io/byte_cursor.h"
#include "torch/security.h"

namespace optstate {
namespace {

constexpr const char* kMagic = "119547037146038801333356";  // 0x1950a86a20f9469cfc6c

}  // namespace

Status ParseLegacyCheckpoint(const ByteCursor& whole, const ReadOptions& options, Checkpoint& out) {
  ByteCursor c = whole;
  OPTSTATE_ASSIGN_OR_RETURN(PickleResult magic, ReadPickle(c, options.pickle));
  const Node& m = magic.graph.at(magic.graph.root);
  if (m.kind != NodeKind::kBigInt || m.text != kMagic) {
    return CorruptError("offset 0: legacy torch.save magic number missing");
  }
  uint64_t at = c.offset();
  OPTSTATE_ASSIGN_OR_RETURN(PickleResult proto, ReadPickle(c, options.pickle));
  const Node& p = proto.graph.at(proto.graph.root);
  if (p.kind != NodeKind::kInt || p.int_value != 1001) {
    return UnsupportedError("offset " + std::to_string(at) + ": legacy protocol version " +
                            (p.kind == NodeKind::kInt ? std::to_string(p.int_value) : TypeName(proto.graph, proto.graph.root)) +
                            " (only 1001 exists)");
  }
  at = c.offset();
  OPTSTATE_ASSIGN_OR_RETURN(PickleResult sys_info, ReadPickle(c, options.pickle));
  const Node& info = sys_info.graph.at(sys_info.graph.root);
  bool little_endian = true;
  for (auto [k, v] : info.entries) {
    const Node& key = sys_info.graph.at(k);
    const Node& val = sys_info.graph.at(v);
    if (key.kind == NodeKind::kStr && key.text == "little_endian" && val.kind == NodeKind::kBool) {
      little_endian = val.bool_value;
    }
  }
  if (!little_endian) {
    return UnsupportedError("offset " + std::to_string(at) + ": big-endian legacy checkpoint");
  }

  uint64_t main_at = c.offset();
  OPTSTATE_ASSIGN_OR_RETURN(PickleResult main, ReadPickle(c, options.pickle));
  ScanPickleStructure(main, "main pickle", whole.size(), out.findings);
  out.pickle_record = "main pickle";
  out.pickle_protocol = main.protocol;
  out.pickle_bytes = main.end_offset - main_at;
  out.graph = std::move(main.graph);
  out.globals = std::move(main.globals);

  at = c.offset();
  OPTSTATE_ASSIGN_OR_RETURN(PickleResult keys, ReadPickle(c, options.pickle));
  out.pickle_opcodes = magic.opcodes | proto.opcodes | sys_info.opcodes | main.opcodes | keys.opcodes;
  // torch.load unpickles all five the same way, checking each only after it
  // ran: a call hidden in the magic-number pickle runs as surely as one in the main.
  for (auto [side, role] : {std::pair<const PickleResult*, const char*>{&magic, "1 (the magic number)"},
                            {&proto, "2 (the protocol version)"},
                            {&sys_info, "3 (sys_info)"},
                            {&keys, "5 (the storage keys)"}}) {
    ScanPickleStructure(*side, std::string("legacy pickle ") + role, whole.size(), out.findings);
    if (side->globals.empty()) continue;
    const std::set<uint64_t> called = CalledGlobalOffsets(side->graph);
    const std::set<uint64_t> lookups = BoundMethodLookups(side->graph);
    ScanGlobals(side->globals, std::string("legacy pickle ") + role, /*nested=*/false, out.findings, &called,
                &lookups);
  }
  const Node& list = keys.graph.at(keys.graph.root);
  if (list.kind != NodeKind::kList) {
    return CorruptError("offset " + std::to_string(at) + ": storage key list is a " +
                        TypeName(keys.graph, keys.graph.root));
  }
  std::vector<std::string> order;
  for (NodeId k : list.items) {
    if (keys.graph.at(k).kind != NodeKind::kStr) {
      return CorruptError("offset " + std::to_string(at) + ": storage key is not a str");
    }
    order.push_back(keys.graph.at(k).text);
  }
  // Each storage's element size is only known from the main pickle, so resolve
  // it first and locate the data afterwards, in key-list order.
  auto defer = [](StorageRef&) { return Status(); };
  OPTSTATE_ASSIGN_OR_RETURN(TorchObjects objects,
                            ResolveTorchObjects(out.graph, defer, options.pickle.max_depth));
  std::unordered_map<std::string, StorageRef*> by_key;
  for (StorageRef& s : objects.storages) by_key[s.key] = &s;
  for (const std::string& key : order) {
    uint64_t record_at = c.offset();
    std::string ctx = "storage '" + key + "'";
    OPTSTATE_ASSIGN_OR_RETURN(int64_t numel, c.ReadI64LE("storage element count"));
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      return CorruptError("offset " + std::to_string(record_at) + ": " + ctx +
                          " has data but the pickle never references it, so its size is unknown");
    }
    StorageRef& s = *it->second;
    if (numel < 0 || static_cast<uint64_t>(numel) < s.numel) {
      return CorruptError("offset " + std::to_string(record_at) + ": " + ctx + " holds " +
                          std::to_string(numel) + " elements, the pickle declares " +
                          std::to_string(s.numel));
    }
    uint64_t elem = GetDTypeInfo(s.dtype).element_size;
    if (static_cast<uint64_t>(numel) > options.max_storage_bytes / elem) {
      return LimitExceededError("offset " + std::to_string(record_at) + ": " + ctx + " of " +
                                std::to_string(numel) + " elements (limit max_storage_bytes)");
    }
    s.data_offset = c.position();  // relative to the parsed buffer, like zip offsets
    s.located = true;
    OPTSTATE_RETURN_IF_ERROR_CTX(c.Skip(static_cast<uint64_t>(numel) * elem, "storage data"), ctx);
  }
  for (const StorageRef& s : objects.storages) {
    if (!s.located) return CorruptError("storage '" + s.key + "': no data follows the pickles");
  }
  out.storages = std::move(objects.storages);
  out.tensors = std::move(objects.tensors);
  return Status();
}

}  // namespace optstate
