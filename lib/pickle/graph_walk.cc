#include "pickle/graph_walk.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <unordered_map>
#include <vector>

namespace optstate {
namespace {

bool IsWord(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string Component(const ObjectGraph& g, NodeId key) {
  const Node& k = g.at(key);
  if ((k.kind == NodeKind::kStr && IsWord(k.text)) || k.kind == NodeKind::kInt) {
    return "." + KeyText(g, key);
  }
  if (k.kind == NodeKind::kStr) return "[\"" + k.text + "\"]";
  return "[" + KeyText(g, key) + "]";
}

std::string Join(const std::string& path, const std::string& component) {
  if (path.empty() && component.starts_with(".")) return component.substr(1);
  return path + component;
}

// Python's repr of a float: the shortest digits that read back exactly, in
// fixed notation for exponents -5 < e < 16 (with ".0" if integral), else
// scientific with a two-digit exponent ("1e-05", "1e+16").
std::string FloatText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  int digits = 17;
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    if (std::strtod(buf, nullptr) == v) {
      digits = p;
      break;
    }
  }
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  std::string sci = buf;
  size_t e = sci.find('e');
  int exp = std::atoi(sci.c_str() + e + 1);
  if (exp > -5 && exp < 16) {
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, digits - 1 - exp), v);
    std::string fixed = buf;
    if (fixed.find('.') == std::string::npos) fixed += ".0";
    return fixed;
  }
  std::string mantissa = sci.substr(0, e);
  std::snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return mantissa + buf;
}

void AppendValue(const ObjectGraph& g, NodeId id, std::string& out, size_t budget, int depth) {
  if (out.size() > budget) return;
  const Node& n = g.at(id);
  switch (n.kind) {
    case NodeKind::kNone: out += "None"; return;
    case NodeKind::kBool: out += n.bool_value ? "True" : "False"; return;
    case NodeKind::kInt: out += std::to_string(n.int_value); return;
    case NodeKind::kBigInt: out += n.text; return;
    case NodeKind::kFloat: out += FloatText(n.float_value); return;
    case NodeKind::kStr: out += "'" + n.text + "'"; return;
    case NodeKind::kBytes: out += "<" + std::to_string(n.text.size()) + " bytes>"; return;
    case NodeKind::kGlobal: out += GlobalName(n); return;
    case NodeKind::kTensor: out += n.text.empty() ? "<tensor>" : n.text; return;
    case NodeKind::kTuple:
    case NodeKind::kList:
    case NodeKind::kSet:
    case NodeKind::kFrozenSet: {
      bool list = n.kind == NodeKind::kList;
      if (depth > 3) {
        out += "...";
        return;
      }
      out += list ? "[" : n.kind == NodeKind::kTuple ? "(" : "{";
      for (size_t i = 0; i < n.items.size(); ++i) {
        if (i) out += ", ";
        if (out.size() > budget) {
          out += "...";
          break;
        }
        AppendValue(g, n.items[i], out, budget, depth + 1);
      }
      if (n.kind == NodeKind::kTuple && n.items.size() == 1) out += ",";
      out += list ? "]" : n.kind == NodeKind::kTuple ? ")" : "}";
      return;
    }
    default: out += "<" + TypeName(g, id) + ">"; return;
  }
}

struct Child {
  std::string component;
  NodeId id;
  NodeId key;
};

std::vector<Child> Children(const ObjectGraph& g, NodeId id) {
  const Node& n = g.at(id);
  std::vector<Child> out;
  switch (n.kind) {
    case NodeKind::kDict:
    case NodeKind::kObject:
      for (auto [k, v] : n.entries) out.push_back({Component(g, k), v, k});
      if (n.kind == NodeKind::kDict) return out;
      [[fallthrough]];
    case NodeKind::kTuple:
    case NodeKind::kList:
    case NodeKind::kSet:
    case NodeKind::kFrozenSet:
      for (size_t i = 0; i < n.items.size(); ++i) {
        out.push_back({"[" + std::to_string(i) + "]", n.items[i], kNoNode});
      }
      if (n.kind == NodeKind::kObject) {
        if (n.args() != kNoNode) out.push_back({".(args)", n.args(), kNoNode});
        if (n.kwargs() != kNoNode) out.push_back({".(kwargs)", n.kwargs(), kNoNode});
        if (n.state() != kNoNode) out.push_back({".(state)", n.state(), kNoNode});
      }
      return out;
    default:
      return out;
  }
}

// How many children Children(g, id) lists, without naming them.
size_t ChildCount(const ObjectGraph& g, NodeId id) {
  const Node& n = g.at(id);
  switch (n.kind) {
    case NodeKind::kDict: return n.entries.size();
    case NodeKind::kObject:
      return n.entries.size() + n.items.size() + (n.args() != kNoNode) + (n.kwargs() != kNoNode) +
             (n.state() != kNoNode);
    case NodeKind::kTuple:
    case NodeKind::kList:
    case NodeKind::kSet:
    case NodeKind::kFrozenSet: return n.items.size();
    default: return 0;
  }
}

}  // namespace

std::string KeyText(const ObjectGraph& graph, NodeId key) {
  const Node& k = graph.at(key);
  if (k.kind == NodeKind::kStr) return k.text;
  std::string out;
  AppendValue(graph, key, out, 200, 0);
  return out;
}

std::string ValueText(const ObjectGraph& graph, NodeId id, size_t max_chars) {
  std::string out;
  AppendValue(graph, id, out, max_chars, 0);
  if (out.size() > max_chars + 3) out = out.substr(0, max_chars) + "...";
  return out;
}

void WalkTree(const ObjectGraph& graph, NodeId root, uint32_t max_depth,
              const std::function<bool(const WalkStep&)>& visit) {
  if (root == kNoNode) return;
  std::unordered_map<NodeId, std::string> seen;
  // Explicit stack: depth is bounded by max_depth, but hostile graphs should not
  // cost C++ stack either.
  std::vector<WalkStep> stack;
  stack.push_back(WalkStep{"", root, kNoNode, 0, false, "", 0, 1, 0});
  while (!stack.empty()) {
    WalkStep step = std::move(stack.back());
    stack.pop_back();
    step.children = ChildCount(graph, step.id);
    // A shared node stands for equal values, not one object reached twice
    // (a tensor's (16, 8) size in every tensor): each occurrence is walked.
    if (step.children > 0 && !graph.at(step.id).shared) {
      auto [it, first] = seen.emplace(step.id, step.path);
      if (!first) {
        step.repeat = true;
        step.first_path = it->second;
        visit(step);
        continue;
      }
    }
    if (!visit(step) || step.depth >= max_depth) continue;
    // Named only when walked into: a search that passes a dict of 10^4
    // parameters by builds none of their paths.
    std::vector<Child> kids = Children(graph, step.id);
    for (size_t i = kids.size(); i-- > 0;) {
      stack.push_back(WalkStep{Join(step.path, kids[i].component), kids[i].id, kids[i].key,
                               step.depth + 1, false, "", i, kids.size(), 0});
    }
  }
}

std::optional<NodeId> FindPath(const ObjectGraph& graph, NodeId root, const std::string& path) {
  if (path.empty()) return root;
  std::optional<NodeId> found;
  WalkTree(graph, root, 64, [&](const WalkStep& s) {
    if (found) return false;
    if (s.path == path) {
      found = s.id;
      return false;
    }
    return path.starts_with(s.path) || s.path.empty();
  });
  return found;
}

}  // namespace optstate
