#include "torch/security.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

#include "io/byte_cursor.h"
#include "io/enum_names.h"
#include "optstate/torch_objects.h"
#include "pickle/graph_walk.h"
#include "zip/zip_archive.h"

namespace optstate {
namespace {

// Where a pickle may start in a bytes value: at 0, or at a PROTO opcode within
// the first bytes (code that unpickles value[1:] or strips a header exists).
// Protocols 0 and 1 have no PROTO: only a value that also ends with STOP is
// tried at 0, and it counts only if it parses and names a global.
constexpr size_t kPaddingLooked = 16;

bool IsProto(const std::string& b, size_t at) {
  return at + 1 < b.size() && static_cast<uint8_t>(b[at]) == 0x80 && static_cast<uint8_t>(b[at + 1]) >= 2 &&
         static_cast<uint8_t>(b[at + 1]) <= 5;
}

struct Candidate {
  size_t at;
  bool framed;  // starts with PROTO: a failed parse is itself worth a warning
};

std::vector<Candidate> PickleCandidates(const std::string& b) {
  std::vector<Candidate> out;
  if (b.size() < 2) return out;
  // pickle.loads ignores whatever follows STOP: a framed pickle counts with
  // bytes after it; an unframed one only when the value ends with STOP.
  for (size_t at = 0; at < b.size() && at < kPaddingLooked; ++at) {
    if (IsProto(b, at)) {
      out.push_back({at, true});
      break;  // the first PROTO: a later one would sit inside this pickle
    }
  }
  if (b.back() == '.' && (out.empty() || out.front().at != 0)) out.insert(out.begin(), Candidate{0, false});
  return out;
}

void ScanGraphBytes(const ObjectGraph& graph, const std::string& prefix, const PickleLimits& limits,
                    uint32_t levels_left, std::vector<Finding>& findings);

// One bytes value: a pickle in it at any candidate start, or a whole torch
// zip (whose data.pkl torch.load(io.BytesIO(value)) would run).
void ScanBytesValue(const std::string& text, const std::string& where, const PickleLimits& limits,
                    uint32_t levels_left, std::vector<Finding>& findings) {
  if (LooksLikeZip(AsBytes(text))) {
    UnreadableScan zip = ScanWhatTorchLoadWouldRun(ByteCursor(AsBytes(text)), limits);
    if (zip.scanned.find("data.pkl") == std::string::npos) return;  // not a torch zip
    findings.push_back({Severity::kWarning, "nested-pickle", where,
                        "bytes value holds a torch.save zip (" + std::to_string(text.size()) +
                            " bytes); torch.load(io.BytesIO(value)) runs whatever its data.pkl references",
                        ""});
    // Judged as any nested pickle's globals are: dangerous ones are errors, the
    // rest warnings (whoever unpickles the value decides what it trusts).
    for (Finding& f : zip.findings) {
      if (f.severity == Severity::kInfo) continue;
      f.where = where + " (nested zip) " + f.where;
      if (f.code != "dangerous-global") {
        f.code = "nested-global";
        f.severity = Severity::kWarning;
        f.message = f.global + " is imported by code that loads this value with torch.load";
      }
      findings.push_back(std::move(f));
    }
    return;
  }
  for (const Candidate& c : PickleCandidates(text)) {
    ByteCursor cursor(AsBytes(std::string_view(text).substr(c.at)));
    StatusOr<PickleResult> inner = ReadPickle(cursor, limits);
    const std::string at = c.at == 0 ? "" : " from byte " + std::to_string(c.at);
    if (!inner.ok()) {
      if (c.framed) {
        findings.push_back({Severity::kWarning, "nested-pickle-unreadable", where,
                            "bytes value looks like a pickle" + at + " but does not parse: " +
                                inner.status().ToString(), ""});
      }
      continue;
    }
    if (!c.framed && inner->globals.empty()) continue;  // text that happens to parse, naming nothing
    findings.push_back({Severity::kWarning, "nested-pickle", where,
                        "bytes value holds a pickle" + at + " (" + std::to_string(text.size() - c.at) +
                            " bytes); code that unpickles it runs whatever it references", ""});
    ScanGlobals(inner->globals, where + " (nested pickle" + at + ")", /*nested=*/true, findings);
    if (levels_left > 1) ScanGraphBytes(inner->graph, where + " > ", limits, levels_left - 1, findings);
    return;
  }
}

void ScanGraphBytes(const ObjectGraph& graph, const std::string& prefix, const PickleLimits& limits,
                    uint32_t levels_left, std::vector<Finding>& findings) {
  // The walk below names every object's path (10^7 strings in a large
  // checkpoint); most graphs hold no bytes at all, which one pass shows.
  bool any_bytes = false;
  for (const Node& n : graph.nodes) {
    if (n.kind == NodeKind::kBytes) {
      any_bytes = true;
      break;
    }
  }
  if (!any_bytes) return;
  WalkTree(graph, graph.root, limits.max_depth, [&](const WalkStep& step) {
    const Node& n = graph.at(step.id);
    if (step.repeat || n.kind != NodeKind::kBytes) return true;
    ScanBytesValue(n.text, prefix + (step.path.empty() ? "(root)" : step.path), limits, levels_left, findings);
    return true;
  });
}

}  // namespace

std::string_view SeverityName(Severity s) {
  static constexpr EnumNames<Severity, 3> kNames(
      {{{Severity::kInfo, "info"}, {Severity::kWarning, "warning"}, {Severity::kError, "error"}}}, "error");
  return kNames.Name(s);
}

void ScanAllocationClaims(const ObjectGraph& graph, const std::vector<GlobalRef>& globals, const std::string& where,
                          uint64_t source_bytes, std::vector<Finding>& findings) {
  // Every checkpoint is read through here: the node walk (4 * 10^6 nodes at
  // 10^6 parameters) only when the pickle names bytearray at all.
  if (std::none_of(globals.begin(), globals.end(), [](const GlobalRef& g) {
        return NormalizeModule(g.module) == "builtins" && g.name == "bytearray";
      })) {
    return;
  }
  constexpr int64_t kQuietBelow = 16 << 20;
  for (const Node& n : graph.nodes) {
    if (n.kind != NodeKind::kObject || n.callable() == kNoNode || n.args() == kNoNode) continue;
    const Node& f = graph.at(n.callable());
    if (f.kind != NodeKind::kGlobal || NormalizeModule(f.module()) != "builtins" || f.name() != "bytearray") continue;
    const Node& args = graph.at(n.args());
    if (args.kind != NodeKind::kTuple || args.items.empty() || graph.at(args.items[0]).kind != NodeKind::kInt) continue;
    const int64_t size = graph.at(args.items[0]).int_value;
    if (size <= kQuietBelow || static_cast<uint64_t>(size) <= source_bytes) continue;
    findings.push_back({Severity::kError, "allocation-claim", where + " offset " + std::to_string(f.offset),
                        "builtins.bytearray(" + std::to_string(size) + ") allocates " + std::to_string(size) +
                            " bytes from a file of " + std::to_string(source_bytes) +
                            ": bytearray is on torch 2.6's weights_only allowlist, so even torch.load(weights_only="
                            "True) makes the process allocate it (a file of a few hundred bytes can take all memory)",
                        "builtins.bytearray"});
  }
}

std::set<uint64_t> CalledGlobalOffsets(const ObjectGraph& graph) {
  std::set<uint64_t> out;
  // Plain tensors' callables, which their nodes do not hold (ObjectGraph).
  for (NodeId c : graph.tensor_callables) out.insert(graph.at(c).offset);
  for (const Node& n : graph.nodes) {
    // A global changed in place (BUILD sets a module's attributes, SETITEM and
    // APPEND write into sys.modules or os.environ) acts on the live interpreter
    // as surely as a call: it counts as one.
    if (n.kind == NodeKind::kGlobal && (n.state() != kNoNode || !n.entries.empty() || !n.items.empty())) {
      out.insert(n.offset);
      continue;
    }
    // A tensor's node keeps the call that built it until ReleaseTensorCalls.
    if (n.kind != NodeKind::kObject && n.kind != NodeKind::kTensor) continue;
    if (n.callable() != kNoNode && graph.at(n.callable()).kind == NodeKind::kGlobal) out.insert(graph.at(n.callable()).offset);
    // A callee may call what it is given (_rebuild_from_type_v2 calls its first
    // argument, copyreg._reconstructor its class's __new__): arguments count too,
    // and so do the items of a list or tuple argument, which a callee may spread
    // into a call of its own (_rebuild_from_type_v2 calls func(*args) on any
    // iterable).
    if (n.args() != kNoNode && graph.at(n.args()).kind == NodeKind::kTuple) {
      for (NodeId a : graph.at(n.args()).items) {
        const Node& arg = graph.at(a);
        if (arg.kind == NodeKind::kGlobal) out.insert(arg.offset);
        if (arg.kind != NodeKind::kList && arg.kind != NodeKind::kTuple) continue;
        for (NodeId inner : arg.items) {
          if (graph.at(inner).kind == NodeKind::kGlobal) out.insert(graph.at(inner).offset);
        }
      }
    }
  }
  return out;
}

std::set<uint64_t> BoundMethodLookups(const ObjectGraph& graph) {
  std::set<uint64_t> benign, other;
  auto built_instance_of_known_class = [&](NodeId id) {
    const Node& o = graph.at(id);
    if (o.kind != NodeKind::kObject || o.callable() == kNoNode) return false;
    const Node* cls = &graph.at(o.callable());
    if (cls->kind == NodeKind::kGlobal && NormalizeModule(cls->module()) == "copyreg" && cls->name() == "_reconstructor") {
      // _reconstructor(cls, object, None) is object.__new__(cls); another base would run its __init__.
      if (o.args() == kNoNode || graph.at(o.args()).kind != NodeKind::kTuple || graph.at(o.args()).items.size() < 2) {
        return false;
      }
      const Node& base = graph.at(graph.at(o.args()).items[1]);
      if (base.kind != NodeKind::kGlobal || NormalizeModule(base.module()) != "builtins" || base.name() != "object") {
        return false;
      }
      cls = &graph.at(graph.at(o.args()).items[0]);
    } else if (o.call != CallOpcode::kNewObj) {
      return false;  // a REDUCE of the class would run its constructor
    }
    return cls->kind == NodeKind::kGlobal && IsKnownDataClass(cls->module(), cls->name());
  };
  // What a call uses: its callable (unless NEWOBJ), and its direct arguments unless the callee
  // is a known data class that only stores them (TensorProperties takes an enum
  // member; _rebuild_from_type_v2 calls its first argument, _reconstructor its
  // class's __new__). A lookup whose result is used so is a step toward a call.
  // A bit per node: a set's insert per argument of every tensor call cost
  // ~5% of validating 4 * 10^4 small tensors.
  std::vector<bool> used_by_calls(graph.nodes.size());
  for (const Node& n : graph.nodes) {
    if (n.kind != NodeKind::kObject && n.kind != NodeKind::kTensor) continue;
    // A plain tensor's callable is in graph.tensor_callables: a global (never
    // a lookup) that is no data class, so it uses its arguments.
    const bool listed_callable = n.kind == NodeKind::kTensor && n.callable() == kNoNode;
    if (n.callable() == kNoNode && !listed_callable) continue;
    bool stores_its_arguments = false;
    if (!listed_callable) {
      // NEWOBJ only makes an instance (cls.__new__, no __init__): how protocol 2
      // spells a nested class, ShardedTensor.ProcessGroupState, is such a lookup.
      if (n.call != CallOpcode::kNewObj) used_by_calls[n.callable()] = true;
      const Node& callee = graph.at(n.callable());
      stores_its_arguments = callee.kind == NodeKind::kGlobal && IsKnownDataClass(callee.module(), callee.name()) &&
                             !(NormalizeModule(callee.module()) == "copyreg" && callee.name() == "_reconstructor");
    }
    if (!stores_its_arguments && n.args() != kNoNode && graph.at(n.args()).kind == NodeKind::kTuple) {
      for (NodeId a : graph.at(n.args()).items) used_by_calls[a] = true;
    }
  }
  for (NodeId id = 0; id < graph.nodes.size(); ++id) {
    const Node& n = graph.at(id);
    if (n.kind != NodeKind::kObject || n.callable() == kNoNode) continue;
    const Node& f = graph.at(n.callable());
    if (f.kind != NodeKind::kGlobal || NormalizeModule(f.module()) != "builtins" || f.name() != "getattr") continue;
    if (used_by_calls[id]) {
      other.insert(f.offset);
      continue;
    }
    const Node* args = n.args() == kNoNode ? nullptr : &graph.at(n.args());
    // The class itself (protocol 2 spells a function nested in a class, SWALR's
    // static _cosine_anneal, as getattr(SWALR, "_cosine_anneal")) or an instance.
    auto known_class_or_instance = [&](NodeId target) {
      const Node& c = graph.at(target);
      if (c.kind == NodeKind::kGlobal) return IsKnownDataClass(c.module(), c.name());
      return built_instance_of_known_class(target);
    };
    const bool ok = args != nullptr && args->kind == NodeKind::kTuple && args->items.size() == 2 &&
                    n.call == CallOpcode::kReduce && known_class_or_instance(args->items[0]) &&
                    graph.at(args->items[1]).kind == NodeKind::kStr &&
                    !graph.at(args->items[1]).text.starts_with("__");
    (ok ? benign : other).insert(f.offset);
  }
  for (uint64_t o : other) benign.erase(o);
  return benign;
}

void ScanGlobals(const std::vector<GlobalRef>& globals, const std::string& where, bool nested,
                 std::vector<Finding>& findings, const std::set<uint64_t>* called,
                 const std::set<uint64_t>* lookups, std::string_view nested_reader) {
  const std::string caller = !nested                 ? std::string("torch.load(weights_only=False)")
                             : nested_reader.empty() ? std::string("code that unpickles this value (HeavyBall does on "
                                                                   "load_state_dict)")
                                                     : std::string(nested_reader);
  for (const GlobalRef& g : globals) {
    std::string loc = where + " offset " + std::to_string(g.offset);
    std::string name = g.module + "." + g.name;
    if (!nested && lookups != nullptr && lookups->count(g.offset)) {
      findings.push_back({Severity::kWarning, "global-not-allowlisted", loc,
                          name + " looks up an attribute of a known class, or of an object the pickle builds of "
                                 "one (a bound method, a nested function, an enum member, as Python pickles them; "
                                 "torch 1.13's OneCycleLR keeps a bound method in its state dict): nothing is "
                                 "called, but it is not on torch 2.6's weights_only allowlist, so torch.load with "
                                 "the default weights_only=True refuses this file", name});
    } else if (IsDangerousGlobal(g.module, g.name)) {
      findings.push_back({Severity::kError, "dangerous-global", loc,
                          name + " can run code or reach the system; " + caller +
                              " would call it. Do not load this with pickle.", name});
    } else if (ImportRunsCode(g.module)) {
      findings.push_back({Severity::kError, "import-runs-code", loc,
                          name + ": resolving it imports " + g.module + ", whose import alone runs code (a "
                                 "package's __main__ runs its program, `this` prints, `antigravity` opens a "
                                 "browser); " + caller + " does that even if the pickle never calls it", name});
    } else if (nested) {
      findings.push_back({Severity::kWarning, "nested-global", loc,
                          name + " is imported by " + caller, name});
    } else if (IsAllowedOnceDistributedTensorImported(g.module, g.name)) {
      // torch.distributed.tensor registers these as safe globals when imported;
      // not all of its classes: FSDP2 + TP's _StridedShard stays refused.
      findings.push_back({Severity::kInfo, "global-needs-import", loc,
                          name + " loads under torch 2.6's weights_only=True only after "
                                 "`import torch.distributed.tensor`", name});
    } else if (IsWeightsOnlyAllowed(g.module, g.name)) {
      continue;
    } else if (IsKnownDataClass(g.module, g.name) || (called != nullptr && !called->count(g.offset))) {
      findings.push_back({Severity::kWarning, "global-not-allowlisted", loc,
                          name + " is not on torch 2.6's weights_only allowlist: "
                                 "torch.load with the default weights_only=True refuses this file" +
                              (IsKnownDataClass(g.module, g.name)
                                   ? std::string()
                                   : std::string(" (the pickle only names it, never calls it; loading imports ") +
                                         g.module + ")"),
                          name});
    } else {
      // Default-deny: torch.load(weights_only=False) would call it, and it is
      // neither on the allowlist nor a known data class.
      findings.push_back({Severity::kError, "unknown-global-called", loc,
                          name + " would be called by " + caller + ", and it is neither on torch 2.6's weights_only "
                                 "allowlist nor a known data class: refused by default (if it is your own class, "
                                 "a rules file's allow_globals can allow it)", name});
    }
  }
}

Status ScanPickleGlobals(ByteCursor& cursor, const std::string& where, const PickleLimits& limits,
                         std::vector<Finding>& findings, PickleResult* got, PickleReadMode mode) {
  PickleResult partial;
  StatusOr<PickleResult> r = ReadPickle(cursor, limits, &partial, mode);
  PickleResult& result = r.ok() ? *r : partial;
  const std::set<uint64_t> called = CalledGlobalOffsets(result.graph);
  const std::set<uint64_t> lookups = BoundMethodLookups(result.graph);
  ScanGlobals(result.globals, where, /*nested=*/false, findings, &called, &lookups);
  ScanAllocationClaims(result.graph, result.globals, where, cursor.size(), findings);
  ScanPickleStructure(result, where, cursor.size(), findings);
  ScanLimitStop(r.status(), limits, where, findings);
  if (got != nullptr) *got = std::move(result);
  return r.status();
}

void ScanBytesAfterStop(ByteSpan rest, uint64_t rest_offset, const std::string& where, const PickleLimits& limits,
                        std::vector<Finding>& findings) {
  if (rest.empty()) return;
  findings.push_back({Severity::kError, "pickle-tampered", where + " offset " + std::to_string(rest_offset),
                      std::to_string(rest.size()) + " byte(s) follow the pickle's STOP: torch.save writes none and "
                          "torch.load never reads them, but a reader that reads the record on (pickle.load in a "
                          "loop, another tool) unpickles them. Python's pickler never writes this",
                      ""});
  ByteCursor c(rest, rest_offset);
  PickleResult partial;
  StatusOr<PickleResult> r = ReadPickle(c, limits, &partial);
  ScanGlobals((r.ok() ? *r : partial).globals, where + " (after STOP)", /*nested=*/true, findings, nullptr, nullptr,
              "a reader that unpickles what follows the STOP");
}

void ScanZipName(std::string_view name, std::vector<Finding>& findings) {
  bool escapes = name.starts_with("/") || name.starts_with("\\") ||
                 (name.size() >= 2 && name[1] == ':' && std::isalpha(static_cast<unsigned char>(name[0])));
  size_t start = 0;
  while (!escapes && start <= name.size()) {  // any ".." path component, with / or \ separators
    size_t end = name.find_first_of("/\\", start);
    if (end == std::string_view::npos) end = name.size();
    escapes = name.substr(start, end - start) == "..";
    start = end + 1;
  }
  if (escapes) {
    findings.push_back({Severity::kError, "zip-name-escapes", "zip entry '" + std::string(name) + "'",
                        "this name points outside the archive's directory: unzipping the file would write "
                        "there. torch.save never writes such names; the file was built or edited by hand.", ""});
  }
}

void ScanNestedPickles(const ObjectGraph& graph, const PickleLimits& limits, uint32_t max_depth,
                       std::vector<Finding>& findings) {
  if (max_depth == 0) return;
  ScanGraphBytes(graph, "", limits, max_depth, findings);
}

}  // namespace optstate
