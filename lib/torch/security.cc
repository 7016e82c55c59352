#include "optstate/security.h"

#include <cctype>

#include "optstate/torch_objects.h"
#include "pickle/graph_walk.h"

namespace optstate {
namespace {

// A protocol 2-5 pickle starts with PROTO n and ends with STOP.
bool LooksLikePickle(const std::string& b) {
  return b.size() >= 3 && static_cast<uint8_t>(b[0]) == 0x80 &&
         static_cast<uint8_t>(b[1]) >= 2 && static_cast<uint8_t>(b[1]) <= 5 && b.back() == '.';
}

void ScanGraphBytes(const ObjectGraph& graph, const std::string& prefix, const PickleLimits& limits,
                    uint32_t levels_left, std::vector<Finding>& findings) {
  WalkTree(graph, graph.root, limits.max_depth, [&](const WalkStep& step) {
    const Node& n = graph.at(step.id);
    if (step.repeat || n.kind != NodeKind::kBytes || !LooksLikePickle(n.text)) return true;
    std::string where = prefix + (step.path.empty() ? "(root)" : step.path);
    ByteCursor cursor(AsBytes(n.text));
    StatusOr<PickleResult> inner = ReadPickle(cursor, limits);
    if (!inner.ok()) {
      findings.push_back({Severity::kWarning, "nested-pickle-unreadable", where,
                          "bytes value looks like a pickle but does not parse: " +
                              inner.status().ToString(), ""});
      return true;
    }
    findings.push_back({Severity::kWarning, "nested-pickle", where,
                        "bytes value holds a pickle (" + std::to_string(n.text.size()) +
                            " bytes); code that unpickles it runs whatever it references", ""});
    ScanGlobals(inner->globals, where + " (nested pickle)", /*nested=*/true, findings);
    if (levels_left > 1) {
      ScanGraphBytes(inner->graph, where + " > ", limits, levels_left - 1, findings);
    }
    return true;
  });
}

}  // namespace

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "error";
}

std::set<uint64_t> CalledGlobalOffsets(const ObjectGraph& graph) {
  std::set<uint64_t> out;
  for (const Node& n : graph.nodes) {
    // A global changed in place (BUILD sets a module's attributes, SETITEM and
    // APPEND write into sys.modules or os.environ) acts on the live interpreter
    // as surely as a call: it counts as one.
    if (n.kind == NodeKind::kGlobal && (n.state != kNoNode || !n.entries.empty() || !n.items.empty())) {
      out.insert(n.offset);
      continue;
    }
    if (n.kind != NodeKind::kObject) continue;
    if (n.callable != kNoNode && graph.at(n.callable).kind == NodeKind::kGlobal) out.insert(graph.at(n.callable).offset);
    // A callee may call what it is given (_rebuild_from_type_v2 calls its first
    // argument, copyreg._reconstructor its class's __new__): arguments count too.
    if (n.args != kNoNode && graph.at(n.args).kind == NodeKind::kTuple) {
      for (NodeId a : graph.at(n.args).items) {
        if (graph.at(a).kind == NodeKind::kGlobal) out.insert(graph.at(a).offset);
      }
    }
  }
  return out;
}

void ScanGlobals(const std::vector<GlobalRef>& globals, const std::string& where, bool nested,
                 std::vector<Finding>& findings, const std::set<uint64_t>* called) {
  const std::string caller = nested ? "code that unpickles this value (HeavyBall does on load_state_dict)"
                                    : "torch.load(weights_only=False)";
  for (const GlobalRef& g : globals) {
    std::string loc = where + " offset " + std::to_string(g.offset);
    std::string name = g.module + "." + g.name;
    if (IsDangerousGlobal(g.module, g.name)) {
      findings.push_back({Severity::kError, "dangerous-global", loc,
                          name + " can run code or reach the system; " + caller +
                              " would call it. Do not load this with pickle.", name});
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

void ScanZipNames(const std::vector<std::string>& names, std::vector<Finding>& findings) {
  for (const std::string& name : names) {
    bool escapes = name.starts_with("/") || name.starts_with("\\") ||
                   (name.size() >= 2 && name[1] == ':' && std::isalpha(static_cast<unsigned char>(name[0])));
    size_t start = 0;
    while (!escapes && start <= name.size()) {  // any ".." path component, with / or \ separators
      size_t end = name.find_first_of("/\\", start);
      if (end == std::string::npos) end = name.size();
      escapes = name.compare(start, end - start, "..") == 0;
      start = end + 1;
    }
    if (escapes) {
      findings.push_back({Severity::kError, "zip-name-escapes", "zip entry '" + name + "'",
                          "this name points outside the archive's directory: unzipping the file would write "
                          "there. torch.save never writes such names; the file was built or edited by hand.", ""});
    }
  }
}

void ScanNestedPickles(const ObjectGraph& graph, const PickleLimits& limits, uint32_t max_depth,
                       std::vector<Finding>& findings) {
  if (max_depth == 0) return;
  ScanGraphBytes(graph, "", limits, max_depth, findings);
}

}  // namespace optstate
