// `optstate diff A B`: two checkpoints of one run compared, parameter by
// parameter: did it move, did its state step on; hyperparameter changes.
#include "commands.h"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "optstate/checkpoint_diff.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "diff";

struct DiffCommandOptions {
  std::vector<std::string> positional;  // A B: files or DCP directories
  DiffSide a, b;                        // --a / --b (rank files), --model-a / --model-b
  DiffOptions diff;
  bool json = false;
};

void DeclareFlags(CLI::App& cmd, DiffCommandOptions& o) {
  cmd.add_option("checkpoints", o.positional,
                 "A B: the earlier and the later checkpoint, each a torch.save file (model and optimizer\n"
                 "state) or a DCP checkpoint directory");
  auto one_each = [](CLI::Option* opt) {
    opt->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  one_each(cmd.add_option("--a", o.a.files, "A given as the rank files of a sharded save: repeat once per rank"));
  one_each(cmd.add_option("--b", o.b.files, "B likewise"));
  one_each(cmd.add_option("--model-a", o.a.models,
                          "A's model state_dict file, once per rank for a rank set (default: A's own 'model' entry)"));
  one_each(cmd.add_option("--model-b", o.b.models, "B's model state_dict file(s)"));
  AddStateKeyFlag(cmd, o.diff.state_key);
  AddJsonFlag(cmd, o.json, "diff", "Write JSON");
}

std::string Number(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  if (*v == static_cast<double>(static_cast<int64_t>(*v)) && std::fabs(*v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(*v));
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", *v);
  }
  return buf;
}

std::string Verdict(const ParamDiff& d) {
  if (d.frozen) return "FROZEN: state stepped on, values unchanged";
  if (!d.max_abs_change) return "not compared: " + d.note;
  if (*d.max_abs_change == 0) return "unchanged (its state did not step either)";
  return "moved";
}

void WriteText(const DiffReport& r, std::ostream& out) {
  out << "A " << r.a << " (parameters from " << r.a_params_from << ")\n";
  out << "B " << r.b << " (parameters from " << r.b_params_from << ")\n\n";
  size_t width = 9;
  for (const ParamDiff& d : r.params) width = std::max(width, d.name.size());
  out << "  " << std::left << std::setw(static_cast<int>(width)) << "parameter" << "  " << std::setw(14) << "shape"
      << std::setw(12) << "rel change" << std::setw(12) << "step A->B" << "verdict\n";
  for (const ParamDiff& d : r.params) {
    out << "  " << std::setw(static_cast<int>(width)) << d.name << "  " << std::setw(14) << ShapeText(d.shape)
        << std::setw(12) << Number(d.relative_change) << std::setw(12) << (d.step_a || d.step_b ? Number(d.step_a) + "->" + Number(d.step_b) : "-")
        << Verdict(d) << "\n";
  }
  out << std::right << "\nhyperparameters: ";
  if (r.groups_a != r.groups_b) out << r.groups_a << " groups in A, " << r.groups_b << " in B; ";
  if (r.hyper.empty()) out << "no change\n";
  else out << r.hyper.size() << (r.hyper.size() == 1 ? " change\n" : " changes\n");
  for (const HyperChange& h : r.hyper) {
    out << "  param_groups[" << h.group << "]." << h.key << ": " << h.a << " -> " << h.b << "\n";
  }
  auto list = [&](const char* what, const std::vector<std::string>& names) {
    out << what << ": ";
    if (names.empty()) out << "none";
    for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << names[i];
    out << "\n";
  };
  list("state appeared in B", r.state_appeared);
  list("state vanished in B", r.state_vanished);
  out << "\n" << r.moved << " moved, " << r.unmoved << " unchanged, " << r.not_compared << " not compared; ";
  if (r.frozen == 0) {
    out << "no frozen parameters\n";
  } else {
    out << r.frozen << " FROZEN: their optimizer state stepped on between A and B but the values did not change "
        << "at all. HeavyBall 0.16-1.5 with foreach=False does this after DCP's lr=0 state-initialising step "
        << "(its per-parameter group copies keep lr=0); the saved lr looks right.\n";
  }
}

nlohmann::ordered_json ToJson(const DiffReport& r) {
  using J = nlohmann::ordered_json;
  J params = J::array();
  for (const ParamDiff& d : r.params) {
    J j = {{"name", d.name}, {"shape", d.shape}, {"in_a", d.in_a}, {"in_b", d.in_b}, {"state_a", d.state_a},
           {"state_b", d.state_b}, {"frozen", d.frozen}};
    if (d.relative_change) j["relative_change"] = *d.relative_change;
    if (d.max_abs_change) j["max_abs_change"] = *d.max_abs_change;
    if (d.step_a) j["step_a"] = *d.step_a;
    if (d.step_b) j["step_b"] = *d.step_b;
    if (!d.note.empty()) j["note"] = d.note;
    params.push_back(std::move(j));
  }
  J hyper = J::array();
  for (const HyperChange& h : r.hyper) hyper.push_back({{"group", h.group}, {"key", h.key}, {"a", h.a}, {"b", h.b}});
  return {{"a", r.a}, {"b", r.b}, {"a_params_from", r.a_params_from}, {"b_params_from", r.b_params_from},
          {"params", std::move(params)}, {"groups_a", r.groups_a}, {"groups_b", r.groups_b},
          {"hyperparameters", std::move(hyper)}, {"state_appeared", r.state_appeared},
          {"state_vanished", r.state_vanished}, {"moved", r.moved}, {"unchanged", r.unmoved},
          {"not_compared", r.not_compared}, {"frozen", r.frozen}};
}

// Exit 0 when no parameter stood still while its state stepped, 1 when some
// did (frozen parameters), 2 when the job cannot be done.
int RunDiff(const DiffCommandOptions& o, CommandOutput& output) {
  DiffSide a = o.a, b = o.b;
  if (!o.positional.empty()) {
    if (o.positional.size() != 2 || !a.files.empty() || !b.files.empty()) {
      return ReportError(output, kName,
                         InvalidArgumentError("give two checkpoints, A B (files or DCP directories), or the rank "
                                              "files of each with --a and --b"),
                         o.json);
    }
    a.files = {o.positional[0]};
    b.files = {o.positional[1]};
  }
  auto r = DiffCheckpointSets(a, b, o.diff);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    // The library's hint names --model; here each side has its own flag.
    return ReportError(output, kName,
                       Status(r.status().code(), std::string(r.status().message()) +
                                                     " (diff needs the parameters' values: --model-a / --model-b)"),
                       o.json);
  }
  if (!r.ok()) return ReportError(output, kName, r.status(), o.json);
  if (o.json) {
    WriteJson(output, ToJson(*r));
  } else {
    WriteText(*r, output.out);
  }
  return r->frozen == 0 ? kExitOk : kExitFindings;
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Compare two checkpoints of one run: which parameters moved, how far their state stepped,\n"
    "hyperparameter changes, state that appeared or vanished",
    "\nA parameter is FROZEN when its state entry's step advanced from A to B while its values are\n"
    "bit for bit the same: one checkpoint cannot show it (the saved lr looks right), two can.\n"
    "\nExit codes: 0 no frozen parameter; 1 frozen parameters; 2 could not do the job.\n"
    "\nExamples:\n"
    "  optstate diff step1000.pt step2000.pt\n"
    "  optstate diff --json ckpt_a.pt ckpt_b.pt\n"
    "  optstate diff --model-a model_a.pt --model-b model_b.pt optim_a.pt optim_b.pt\n"
    "  optstate diff checkpoints/step_1000 checkpoints/step_2000     # DCP directories\n"
    "  optstate diff --a s1/rank0.pt --a s1/rank1.pt --b s2/rank0.pt --b s2/rank1.pt \\\n"
    "      --model-a s1/model0.pt --model-a s1/model1.pt --model-b s2/model0.pt --model-b s2/model1.pt",
};

CommandRunner AddDiffCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunDiff);
}

}  // namespace optstate::tools
