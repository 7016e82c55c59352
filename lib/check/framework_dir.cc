#include "optstate/framework_dir.h"

#include <algorithm>
#include <filesystem>
#include <regex>

namespace optstate {
namespace {

// What a file is, by the names HF Trainer (trainer.py's _save_checkpoint and
// its constants), accelerate (save_accelerator_state) and DeepSpeed
// (engine.save_checkpoint) give them.
std::string RoleOf(const std::string& name) {
  static const std::vector<std::pair<std::regex, std::string>> kRoles = {
      {std::regex(R"((model|pytorch_model)(_\d+)?(-\d{5}-of-\d{5})?\.(safetensors|bin))"), "model"},
      {std::regex(R"(optimizer(_\d+)?\.(pt|bin))"), "optimizer"},
      {std::regex(R"(scheduler(_\d+)?\.(pt|bin))"), "scheduler"},
      {std::regex(R"(rng_state(_\d+)?\.pth|random_states_\d+\.pkl)"), "rng"},
      {std::regex(R"(scaler(_\d+)?\.pt)"), "scaler"},
      {std::regex(R"(sampler(_\d+)?\.bin)"), "sampler"},
      {std::regex(R"(mp_rank_\d+_model_states\.pt|zero_pp_rank_\d+_mp_rank_\d+_model_states\.pt)"), "model"},
      {std::regex(R"(.*_optim_states\.pt)"), "optimizer"},
  };
  for (const auto& [pattern, role] : kRoles) {
    if (std::regex_match(name, pattern)) return role;
  }
  return "";
}

}  // namespace

StatusOr<FrameworkDir> FindFrameworkFiles(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec)) names.push_back(entry.path().filename().string());
  }
  if (ec) return IoError(dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  FrameworkDir out;
  bool deepspeed = false, accelerate = false;
  for (const std::string& n : names) {
    deepspeed |= n.ends_with("_optim_states.pt") || n.ends_with("_model_states.pt");
    accelerate |= n.starts_with("random_states_") || (n.starts_with("optimizer") && n.ends_with(".bin"));
  }
  out.layout = has("trainer_state.json") ? "hf-trainer" : deepspeed ? "deepspeed" : accelerate ? "accelerate" : "";
  if (out.layout.empty()) {
    return NotFoundError(dir + ": a directory that is neither a DCP checkpoint (no .metadata) nor a framework "
                         "checkpoint (no trainer_state.json of HF Trainer, no optimizer.bin or random_states_0.pkl "
                         "of accelerate, no *_model_states.pt of DeepSpeed)");
  }
  const std::string base = dir.ends_with('/') ? dir : dir + "/";
  for (const std::string& n : names) {
    std::string role = RoleOf(n);
    if (!role.empty()) {
      out.files.push_back({role, base + n, true});
    } else if (n.ends_with(".json") || n == "latest" || n.ends_with(".py") || n.ends_with(".txt")) {
      out.files.push_back({"other", base + n, false});
    } else if (n.ends_with(".pt") || n.ends_with(".bin") || n.ends_with(".pth") || n.ends_with(".pkl") ||
               n.ends_with(".safetensors")) {
      out.files.push_back({"other", base + n, true});  // unknown to the conventions, still checked
    } else {
      out.files.push_back({"other", base + n, false});
    }
  }
  const bool hf = out.layout == "hf-trainer";
  if (out.layout != "deepspeed") {
    if (!out.Find("model")) out.missing.push_back("model (model.safetensors or pytorch_model.bin)");
    if (!out.Find("optimizer")) {
      out.missing.push_back(hf ? "optimizer (optimizer.pt; absent when saved with save_only_model)"
                               : "optimizer (optimizer.bin)");
    }
  }
  return out;
}

}  // namespace optstate
