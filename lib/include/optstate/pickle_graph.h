// The object graph a pickle describes, built without importing or running anything.
//
// Every value the pickle creates is one Node in an arena, referred to by NodeId.
// Memo sharing is preserved: an object reached twice (BINGET of a memoized list,
// a tensor whose storage is shared) is one node, and mutating opcodes (APPEND,
// SETITEMS, BUILD) change that node, as in Python. Calls the pickle asks for
// (REDUCE, NEWOBJ, INST, OBJ) are never performed: they become kObject nodes that
// record what would have been called with which arguments. The torch layer
// (torch_semantics.h) later recognises the calls it knows (tensor rebuilds,
// OrderedDict, torch.Size, ...) and rewrites those nodes in place.
#ifndef OPTSTATE_PICKLE_GRAPH_H_
#define OPTSTATE_PICKLE_GRAPH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "optstate/chunked_arena.h"
#include "optstate/compact_containers.h"
#include "optstate/status.h"

namespace optstate {

using NodeId = uint32_t;
inline constexpr NodeId kNoNode = UINT32_MAX;

enum class NodeKind : uint8_t {
  kNone,
  kBool,
  kInt,      // fits int64: `int_value`
  kBigInt,   // does not: `text` holds the exact decimal digits (with '-')
  kFloat,
  kStr,      // UTF-8 in `text`
  kBytes,    // raw bytes in `text`
  kTuple,    // `items`; `class_name` "torch.Size" once recognised
  kList,     // `items`
  kDict,     // `entries`, insertion order; `class_name` e.g. "collections.OrderedDict"
  kSet,      // `items`
  kFrozenSet,
  kGlobal,   // a reference to module.name (`module`, `name`); never imported
  kObject,   // an unperformed call: `callable`, `args`, `kwargs`, plus BUILD `state`
             // and any APPEND/SETITEMS applied to the result (`items`, `entries`)
  kPersistentId,  // persistent_load(`args`): torch's storage references
  kTensor,   // recognised by the torch layer: `tensor` indexes Checkpoint::tensors
  kStorage,  // recognised persistent id: `storage` indexes Checkpoint::storages
};

// How a kObject was asked for, kept for reports ("REDUCE", "NEWOBJ", ...).
enum class CallOpcode : uint8_t { kReduce, kNewObj, kNewObjEx, kInst, kObj, kExtension };

// One dict entry: key node, value node.
struct Entry {
  NodeId first = kNoNode;
  NodeId second = kNoNode;
  Entry() = default;
  Entry(NodeId k, NodeId v) : first(k), second(v) {}
  Entry(const std::pair<NodeId, NodeId>& p) : first(p.first), second(p.second) {}  // NOLINT: as the pair it was
  operator std::pair<NodeId, NodeId>() const { return {first, second}; }          // NOLINT
  friend bool operator==(const Entry&, const Entry&) = default;
};

// What few nodes carry, held out of line: a call's keyword arguments and
// BUILD state, a global's module and name (one text, Node::set_global), the
// class a call refined to something other than a container was (a
// bytearray, an instance), and the call of a node whose value fills the node
// (a kTensor's rebuild call). 24 bytes, the most a 32-byte malloc block
// holds: at 40 they took 48-byte blocks. A call's callable and arguments,
// and a refined container's class, are held in the node (Node::set_callable).
struct NodeExtra {
  NodeId callable = kNoNode;  // only for kInt, kFloat, kTensor (see Node::CallInNode)
  NodeId args = kNoNode;      // the same
  NodeId kwargs = kNoNode;    // kObject (NEWOBJ_EX)
  NodeId state = kNoNode;     // kObject: argument of BUILD
  CompactText text;           // kGlobal: module and name; kObject, kBytes: refined class
};
static_assert(sizeof(NodeExtra) <= 24, "one per tensor while its rebuild call is kept");

// 56 bytes (240 before the string and list fields were made compact, see
// compact_containers.h; 72 before the nesting depth moved into the pickle
// machine, the only reader, and the offset became 40 bits; 64 while a list
// kept its capacity beside its size): a file of 10^5
// parameters has ~3 * 10^6 nodes, and on a virtual machine each byte first
// touched costs about a nanosecond.
struct Node {
  // Offsets at or past 2^40 (a pickle a terabyte into its file) read as
  // kOffsetUnknown; every other offset is exact.
  static constexpr uint64_t kOffsetUnknown = (uint64_t{1} << 40) - 1;

  NodeKind kind : 8 = NodeKind::kNone;
  CallOpcode call : 8 = CallOpcode::kReduce;
  bool bool_value : 1 = false;
  // One node stands for many occurrences of an immutable value (None, True,
  // False, (), and recurring ints and strs): never changed in place, and the
  // writer writes it afresh at each, as the pickle had it.
  bool shared : 1 = false;
  uint64_t offset : 40 = 0;         // absolute byte offset of the creating opcode
  // One value per kind, so they share their bytes: read only the member the
  // kind names. Every kind without a value here (calls, containers, persistent
  // ids and the rest) keeps its call's callable and argument tuple in these
  // bytes, each as id + 1 (0: none), so that the two calls and the persistent
  // id of each tensor of a torch.save file need no out-of-line block. A
  // kStorage (a persistent id recognised) keeps its storage index where the
  // callable was, as a persistent id has none; so does a kTensor its tensor
  // index, its callable going out of line or, for a plain tensor, to the
  // graph's tensor_callables (see there).
  union {
    int64_t int_value = 0;          // kInt
    double float_value;             // kFloat
    struct {
      union {
        uint32_t storage;  // kStorage
        uint32_t tensor;   // kTensor
        uint32_t callable_plus_one_;
      };
      uint32_t args_plus_one_;
    };
  };
  CompactText text;                 // str / bytes / big int digits; a container's refined class
  CompactList<NodeId> items;        // tuple / list / set / object APPENDs
  CompactList<Entry> entries;       // dict / object SETITEMs

  // A call's parts: reads give kNoNode where none were set. Set the kind
  // first: where they are held depends on it.
  NodeId callable() const {
    if (CallableInNode()) return callable_plus_one_ - 1;
    return more_ ? more_->callable : kNoNode;
  }
  NodeId args() const {
    if (CallInNode()) return args_plus_one_ - 1;
    return more_ ? more_->args : kNoNode;
  }
  NodeId kwargs() const { return more_ ? more_->kwargs : kNoNode; }
  NodeId state() const { return more_ ? more_->state : kNoNode; }
  // A kGlobal's module and name ("" for any other node).
  std::string_view module() const { return GlobalPart(true); }
  std::string_view name() const { return GlobalPart(false); }
  // The class a call was refined to ("" for a kGlobal).
  const CompactText& class_name() const {
    if (IsContainer()) return text;
    return kind != NodeKind::kGlobal && more_ ? more_->text : kNoText;
  }
  // Makes this node the global module.name: its kind must be kGlobal. Held as
  // the module's length (4 bytes), the module and the name.
  void set_global(std::string_view module, std::string_view global_name);
  // The node must not be a kGlobal; its kind must be set first.
  void set_class_name(CompactText class_text) {
    if (IsContainer()) {
      text = std::move(class_text);
    } else {
      extra().text = std::move(class_text);
    }
  }
  void set_callable(NodeId c) {
    if (CallableInNode()) {
      callable_plus_one_ = c + 1;
    } else if (c != kNoNode || more_) {
      extra().callable = c;
    }
  }
  void set_args(NodeId a) {
    if (CallInNode()) {
      args_plus_one_ = a + 1;
    } else if (a != kNoNode || more_) {
      extra().args = a;
    }
  }
  // Whether the arguments are held in the node: every kind but those whose
  // value fills it.
  bool CallInNode() const { return kind != NodeKind::kInt && kind != NodeKind::kFloat; }
  // The callable's half of that: a kStorage's or kTensor's index takes its place.
  bool CallableInNode() const { return CallInNode() && kind != NodeKind::kStorage && kind != NodeKind::kTensor; }
  bool IsContainer() const {
    return kind == NodeKind::kTuple || kind == NodeKind::kList || kind == NodeKind::kDict || kind == NodeKind::kSet ||
           kind == NodeKind::kFrozenSet;
  }
  // kwargs, state and the texts of globals and refined non-containers.
  NodeExtra& extra() { return more_.GetOrCreate(); }
  void set_offset(uint64_t at) { offset = at < kOffsetUnknown ? at : kOffsetUnknown; }
  bool has_extra() const { return static_cast<bool>(more_); }
  void drop_extra() { more_ = OutOfLine<NodeExtra>(); }

 private:
  static inline const CompactText kNoText;
  std::string_view GlobalPart(bool module) const;
  OutOfLine<NodeExtra> more_;
};

static_assert(sizeof(Node) <= 56, "a node's size multiplies by the 10^7 nodes of large checkpoints");

// Calls visit(child) for each node `n` refers to, in the order the pickle made
// them: the call (callable, args, kwargs, BUILD state), then items, then each
// entry's key and value; references to no node are skipped. Every walk over a
// graph goes through these, so none can miss a kind of reference.
template <typename Visit>
void ForEachChild(const Node& n, Visit&& visit) {
  for (NodeId c : {n.callable(), n.args(), n.kwargs(), n.state()}) {
    if (c != kNoNode) visit(c);
  }
  for (NodeId c : n.items) visit(c);
  for (const Entry& e : n.entries) {
    visit(e.first);
    visit(e.second);
  }
}

// The same, stopping at (and returning) the first error a visit returns.
template <typename Visit>
Status ForEachChildUntilError(const Node& n, Visit&& visit) {
  for (NodeId c : {n.callable(), n.args(), n.kwargs(), n.state()}) {
    if (c != kNoNode) OPTSTATE_RETURN_IF_ERROR(visit(c));
  }
  for (NodeId c : n.items) OPTSTATE_RETURN_IF_ERROR(visit(c));
  for (const Entry& e : n.entries) {
    OPTSTATE_RETURN_IF_ERROR(visit(e.first));
    OPTSTATE_RETURN_IF_ERROR(visit(e.second));
  }
  return Status();
}

// The same over the references themselves, to rewrite them in place; here
// references to no node are passed too.
template <typename Fix>
void ForEachChildRef(Node& n, Fix&& fix) {
  NodeId callable = n.callable();
  NodeId args = n.args();
  fix(callable);
  fix(args);
  n.set_callable(callable);
  n.set_args(args);
  if (n.has_extra()) {
    NodeExtra& x = n.extra();
    fix(x.kwargs);
    fix(x.state);
  }
  for (NodeId& c : n.items) fix(c);
  for (Entry& e : n.entries) {
    fix(e.first);
    fix(e.second);
  }
}

struct ObjectGraph {
  ChunkedArena<Node> nodes;
  NodeId root = kNoNode;
  // The calls and persistent ids the pickle machine made, counted as it made
  // them (a graph built otherwise has 0 here): the torch layer reserves its
  // tensor and storage arrays by them without a walk over 10^7 nodes. Kinds
  // change afterwards, so read them only as the reserve they are.
  uint64_t calls_made = 0;
  uint64_t persistent_ids_made = 0;
  // The callables of plain tensors' rebuild calls (torch globals such as
  // _rebuild_tensor_v2), each once a run of tensors that share it: a
  // kTensor's index takes its callable's place in the node, and a block out
  // of line for it cost 32 bytes a tensor at the read's peak. The security
  // scans count them as called; ReleaseTensorCalls empties the list.
  std::vector<NodeId> tensor_callables;

  const Node& at(NodeId id) const { return nodes[id]; }
  Node& at(NodeId id) { return nodes[id]; }
};

// What reading a pickle may cost (the pickle reader checks each before it
// allocates), and the globals it names.
// Walks of the graph recurse once a level: 5000 levels fit the 8 MiB main
// stack with room to spare (60000 did not, in a release build). A larger
// max_depth acts as this.
inline constexpr uint32_t kMaxPickleDepth = 5000;

struct PickleLimits {
  uint32_t max_depth = 1000;              // nesting of containers and calls (at most kMaxPickleDepth)
  // Memory per pickle stays under about 5 GiB whatever the input: a node is
  // 56 bytes (88 with out-of-line fields: a BUILD state, say), a memo entry
  // ~40. A 70B-parameter model's checkpoint has a few hundred thousand nodes,
  // but the count grows with the tensors: 10^5 parameters with Adam state are
  // ~3 * 10^6 nodes (recurring ints, short strs and tuples of them share one),
  // 10^6 parameters ~3 * 10^7, a DCP .metadata of 320 k chunks ~10^7 (which
  // the earlier 2^23 refused).
  uint64_t max_memo = 1u << 25;           // memo entries
  uint64_t max_nodes = 1u << 25;          // objects in the graph
  // Items on the stack at once. Python's pickler writes lists, dicts and sets
  // in batches of 1000, so only a tuple or frozenset of its own size reaches
  // this; a million objects pushed and nested only afterwards (each 56 bytes
  // before the depth limit can see them) do.
  uint64_t max_stack = 1u << 19;
  uint64_t max_string_bytes = 1ull << 30;  // one str or bytes value
  // One LONG4 integer. Its decimal text costs time quadratic in its length, so
  // it is capped far below strings: 1 KiB is 2466 digits; checkpoints hold
  // pointers of 8 bytes and less.
  uint64_t max_long_bytes = 1024;

  friend bool operator==(const PickleLimits&, const PickleLimits&) = default;
};

struct GlobalRef {
  std::string module;
  std::string name;
  uint64_t offset;  // of the GLOBAL / STACK_GLOBAL / INST opcode
  std::string opcode;
};

// Keeps the nodes with keep[id] set, in their order, and frees the rest:
// references and the root are renumbered, the arena shrinks. Every node a
// kept node refers to must be kept. Returns the number of nodes kept.
size_t CompactGraph(ObjectGraph& graph, const std::vector<bool>& keep);

// "module.name" of a kGlobal node, "" otherwise.
std::string GlobalName(const Node& node);

// Python-like type name for reports: "int", "str", "tuple", "dict",
// "collections.OrderedDict", "tensor", "torch.nn.Module" (for an object, its
// callable's name), ...
std::string TypeName(const ObjectGraph& graph, NodeId id);

// The value of a str key in a dict node, or kNoNode.
NodeId DictLookup(const ObjectGraph& graph, NodeId dict, std::string_view key);

}  // namespace optstate

#endif  // OPTSTATE_PICKLE_GRAPH_H_
