// `optstate validate`: a checkpoint gate for CI. Rules with stable ids, each
// with a default severity that a rules file may change (or turn off); every
// finding names its rule, severity, where in the checkpoint, and what to do.
//
// Works on torch.save files (and .zst) and on DCP directories (the object they
// rebuild). Rules that need the model's parameter list, or tensor values when
// --no-values is given, are listed as skipped with the reason, never silently.
#ifndef OPTSTATE_VALIDATE_H_
#define OPTSTATE_VALIDATE_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/collisions.h"
#include "optstate/status.h"

namespace optstate {

enum class RuleSeverity { kOff, kInfo, kWarning, kError };
std::string_view RuleSeverityName(RuleSeverity s);  // "off", "info", "warning", "error"
std::optional<RuleSeverity> RuleSeverityFromName(std::string_view name);

struct RuleInfo {
  std::string_view id;
  RuleSeverity default_severity;
  std::string_view checks;       // one line: what fires it
  bool needs_values = false;     // reads tensor bytes (skipped under --no-values)
  bool needs_params = false;     // needs the parameter list (--model, --manifest, or the file's own model)
  bool needs_rank_set = false;   // compares the files of a sharded save: not listed for one file
  bool needs_optimizer = false;  // looks at optimizer state: skipped when the checkpoint holds none
};

// Every rule, in report order. Ids are stable: rules files and CI configs name them.
const std::vector<RuleInfo>& ValidationRules();

struct ValidationFinding {
  std::string rule;
  RuleSeverity severity = RuleSeverity::kError;
  std::string path;     // inside the checkpoint: "optimizer.state[3].exp_avg", "data.pkl offset 120"
  std::string message;  // what it means and what to do
  std::string global;   // "module.name" when the finding is about one global a pickle names, else ""
};

struct ValidationReport {
  std::string input;
  std::string format;                  // "zip", "legacy", "zstd", "dcp"
  std::vector<ValidationFinding> findings;
  std::vector<std::string> checked;    // rule ids that ran
  std::vector<std::pair<std::string, std::string>> skipped;  // rule id, why
  // Globals the rules file allowlists that this checkpoint references, with
  // how often ("numpy.dtype (2 references)"): not findings, but not hidden.
  std::vector<std::string> allowlisted;
  uint64_t value_bytes = 0;            // tensor bytes read
  // Set when the file could not be read as a checkpoint but what torch.load
  // would run of it names a global that is an error to call: the findings are
  // that scan's, every other rule is skipped (format "unreadable").
  struct ReadError {
    std::string message;                   // why it could not be read
    std::string scanned;                   // what was scanned instead
    std::string stopped_at;                // where torch.load would stop, if before the end
    std::vector<std::string> not_scanned;  // what could not be looked at
  };
  std::optional<ReadError> read_error;
  // What torch 2.6's default torch.load (weights_only=True) does with the
  // file: "accepts", "refuses" (`reasons` say why: an opcode its unpickler
  // does not take, a global off its allowlist, a format it does not read), or
  // "unknown" (a directory, or a file that could not be read).
  struct TorchLoadPrediction {
    std::string weights_only = "unknown";
    std::vector<std::string> reasons;
  };
  TorchLoadPrediction torch_load;
  bool failed() const;                 // some finding at error severity
};

struct ValidateOptions {
  bool scan_values = true;
  // Where the parameters come from for the rules that need them; nullopt: the
  // checkpoint's own model entry if it has one (else those rules are skipped).
  std::optional<ParamSource> params;
  std::map<std::string, RuleSeverity> severities;  // overrides, from a rules file
  // "module.name" globals a rules file allowlists: their global-not-allowlisted
  // and nested-pickle findings are dropped (never a dangerous one's).
  std::set<std::string> allowed_globals;
  ReadOptions read;
  // Which optimizer state dict the parameter rules check when the file holds
  // several ("" = the only one); the other rules check every one.
  std::string state_key;
};

// Errors only for input that cannot be read at all (exit 2); everything wrong
// inside a readable checkpoint is a finding.
StatusOr<ValidationReport> Validate(const std::string& path, const ValidateOptions& options);

// A DeepSpeed ZeRO tag directory as one save: every rank's files present and
// readable (zero-rank-files), the partitions tiling the parameters the model
// states list (zero-layout), the ranks at one step with one set of group
// hyperparameters (zero-ranks-agree). Format "deepspeed-zero". The files'
// own rules are each file's Validate. Errors when it is no ZeRO checkpoint.
StatusOr<ValidationReport> ValidateZeroDirectory(const std::string& tag_dir, const ValidateOptions& options);

// The per-rank files of one sharded save (rank order, or named rank<N>), with
// `models` one per rank (or none: a manifest in options.params, or each file's
// own model entry). Each rank is validated as above; a finding on every rank is
// reported once ("every rank: ..."), others name their ranks; a rule counts as
// checked only when it ran on every rank. rank-set-mismatch compares the ranks
// (collisions.h, OpenAndMatchRankSet) when there are parameters to compare.
StatusOr<ValidationReport> ValidateRankSet(const std::vector<std::string>& files,
                                           const std::vector<std::string>& models, const ValidateOptions& options);

// {"rules": {"<id>": "off" | "info" | "warning" | "error"}} (schemas/validate-rules.schema.json).
// Unknown ids and severities are errors naming them.
struct RulesFile {
  std::map<std::string, RuleSeverity> severities;
  std::set<std::string> allowed_globals;
};
StatusOr<RulesFile> ParseRulesFile(std::string_view json_text);

// The files of a training framework's checkpoint directory, found by each
// framework's naming conventions: HF Trainer's checkpoint-N/, accelerate's
// save_state directory, DeepSpeed's global_stepN/. What each file is for
// decides how it is checked (the optimizer against the model beside it).
struct FrameworkFile {
  std::string role;  // "model", "optimizer", "scheduler", "rng", "scaler", "sampler", "other"
  std::string path;
  bool checkpoint = true;  // a torch.save / safetensors file; false: JSON or text, listed only
};

struct FrameworkDir {
  std::string layout;                 // "hf-trainer", "accelerate", "deepspeed"
  std::vector<FrameworkFile> files;   // sorted by name
  std::vector<std::string> missing;   // "optimizer (optimizer.pt)": what the layout usually has
  std::string tag;                    // DeepSpeed, given its save_dir: the tag directory `latest` named
  // The directory the files are in: `dir` itself, or the tag directory in it.
  std::string TagDirectory(const std::string& dir) const { return tag.empty() ? dir : dir + "/" + tag; }
  const FrameworkFile* Find(const std::string& role) const {
    for (const FrameworkFile& f : files) {
      if (f.role == role) return &f;
    }
    return nullptr;
  }
};

// kNotFound naming the conventions looked for when `dir` is none of them (a
// DCP directory is not one: IsDcpDirectory first).
StatusOr<FrameworkDir> FindFrameworkFiles(const std::string& dir);

// What `validate --each` checks: every checkpoint under some paths.
struct CheckpointSearch {
  std::vector<std::string> checkpoints;        // in the order given; a directory's finds in name order
  std::vector<std::string> skipped;            // files under walked directories that are no checkpoint
  std::vector<std::string> empty_directories;  // paths given that held no checkpoint at all
};

struct FindCheckpointsOptions {
  // Framework directories (HF Trainer, accelerate, DeepSpeed) taken whole, as
  // validate checks them; false: only DeepSpeed's (whose layout inspect shows),
  // the others walked for their files.
  bool framework_directories = true;
};

// A path given that is a file, a DCP directory or a framework's checkpoint
// directory is one checkpoint (a file always, so that the command says what it
// is). Any other directory is walked for them, entries in name order, those
// named ".*" left out and symlinked directories not followed; a file found so
// counts when its first bytes are a torch.save zip, legacy or tar file, a zstd
// frame or a safetensors header (or it cannot be opened: validate says why).
// Errors: kNotFound for a path that does not exist, kIoError for a directory
// that cannot be listed, kInvalidArgument past 32 levels.
StatusOr<CheckpointSearch> FindCheckpoints(const std::vector<std::string>& paths,
                                           const FindCheckpointsOptions& options = {});

}  // namespace optstate

#endif  // OPTSTATE_VALIDATE_H_
