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

// What only calls, globals and refined containers carry: about one node in
// eight of a torch.save file, so it is held out of line. 24 bytes, the most a
// 32-byte malloc block holds: a torch.save file has two per tensor (its
// rebuild call, the OrderedDict() of its hooks), 8 * 10^6 at 10^6 parameters,
// and at 40 bytes each took a 48-byte block. A global's module and name share
// one text (Node::set_global), in the slot a refined container keeps its class
// in. A persistent id keeps its one argument in the node (Node::set_args).
struct NodeExtra {
  NodeId callable = kNoNode;  // kObject
  NodeId args = kNoNode;      // kObject (a kPersistentId's is in the node)
  NodeId kwargs = kNoNode;    // kObject (NEWOBJ_EX)
  NodeId state = kNoNode;     // kObject: argument of BUILD
  CompactText text;           // kGlobal: module and name; others: refined container class after the torch layer
};
static_assert(sizeof(NodeExtra) <= 24, "one per call: 2 per tensor");

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
  // kind names (a kTensor rewritten from a call keeps nothing else here).
  union {
    int64_t int_value = 0;          // kInt
    double float_value;             // kFloat
    uint32_t tensor;                // kTensor
    // kPersistentId, and the kStorage it becomes: the argument tuple beside
    // the storage index, so that a storage (one per tensor of a torch.save
    // file) needs no out-of-line block. Held as id + 1: 0 is no node.
    struct {
      uint32_t storage;  // kStorage
      uint32_t persistent_args_plus_one_;
    };
  };
  CompactText text;                 // str / bytes / big int digits
  CompactList<NodeId> items;        // tuple / list / set / object APPENDs
  CompactList<Entry> entries;       // dict / object SETITEMs

  // The out-of-line fields: reads give kNoNode or "" where none were set;
  // writes go through extra(), which makes them on first use.
  NodeId callable() const { return more_ ? more_->callable : kNoNode; }
  NodeId args() const {
    if (HoldsArgsInline()) return persistent_args_plus_one_ - 1;
    return more_ ? more_->args : kNoNode;
  }
  NodeId kwargs() const { return more_ ? more_->kwargs : kNoNode; }
  NodeId state() const { return more_ ? more_->state : kNoNode; }
  // A kGlobal's module and name ("" for any other node).
  std::string_view module() const { return GlobalPart(true); }
  std::string_view name() const { return GlobalPart(false); }
  // The class a container was refined to ("" for a kGlobal).
  const CompactText& class_name() const { return kind != NodeKind::kGlobal && more_ ? more_->text : kNoText; }
  // Makes this node the global module.name: its kind must be kGlobal. Held as
  // the module's length (4 bytes), the module and the name.
  void set_global(std::string_view module, std::string_view global_name);
  // The node must not be a kGlobal.
  void set_class_name(CompactText class_text) { extra().text = std::move(class_text); }
  // The node's kind must be set first: a kPersistentId's argument is held in
  // the node, any other's out of line.
  void set_args(NodeId a) {
    if (HoldsArgsInline()) {
      persistent_args_plus_one_ = a + 1;
    } else if (a != kNoNode || more_) {
      extra().args = a;
    }
  }
  bool HoldsArgsInline() const { return kind == NodeKind::kPersistentId || kind == NodeKind::kStorage; }
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
  if (n.HoldsArgsInline()) {
    NodeId args = n.args();
    fix(args);
    n.set_args(args);
  }
  if (n.has_extra()) {
    NodeExtra& x = n.extra();
    for (NodeId* ref : {&x.callable, &x.args, &x.kwargs, &x.state}) fix(*ref);
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
  // 56 bytes (88 when it is a call, with its out-of-line fields), a memo entry
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
