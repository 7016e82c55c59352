#include "optstate/validate.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string_view>

namespace optstate {
namespace {

// `name` is `stem`, an optional "_<digits>" (a rank or an index), then one of
// `exts`: optimizer.bin, optimizer_1.bin, rng_state_3.pth.
bool StemIndexExt(std::string_view name, std::string_view stem, std::initializer_list<std::string_view> exts) {
  if (!name.starts_with(stem)) return false;
  std::string_view rest = name.substr(stem.size());
  if (rest.starts_with("_")) {
    size_t digits = 1;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
    if (digits == 1) return false;
    rest.remove_prefix(digits);
  }
  for (std::string_view ext : exts) {
    if (rest == ext) return true;
  }
  return false;
}

// What a file is, by the names HF Trainer (trainer.py's _save_checkpoint and
// its constants), accelerate (save_accelerator_state) and DeepSpeed
// (engine.save_checkpoint) give them. Plain string tests: std::regex trips
// GCC 12's -Wmaybe-uninitialized in the sanitized build.
std::string RoleOf(const std::string& name) {
  const std::string_view n = name;
  // model.safetensors, pytorch_model.bin, model-00001-of-00003.safetensors
  for (std::string_view stem : {"model", "pytorch_model"}) {
    if (StemIndexExt(n, stem, {".safetensors", ".bin"})) return "model";
    if (n.starts_with(stem) && n.substr(stem.size()).starts_with("-") && n.find("-of-") != std::string_view::npos &&
        (n.ends_with(".safetensors") || n.ends_with(".bin"))) {
      return "model";
    }
  }
  if (StemIndexExt(n, "optimizer", {".pt", ".bin"})) return "optimizer";
  if (StemIndexExt(n, "scheduler", {".pt", ".bin"})) return "scheduler";
  if (StemIndexExt(n, "rng_state", {".pth"})) return "rng";
  if (n.starts_with("random_states_") && n.ends_with(".pkl")) return "rng";
  if (StemIndexExt(n, "scaler", {".pt"})) return "scaler";
  if (StemIndexExt(n, "sampler", {".bin"})) return "sampler";
  if (n.ends_with("_model_states.pt")) return "model";      // mp_rank_00_, zero_pp_rank_R_mp_rank_00_
  if (n.ends_with("_optim_states.pt")) return "optimizer";  // (bf16_)zero_pp_rank_R_mp_rank_00_
  return "";
}

// The tag in DeepSpeed's `latest` file: one line naming a directory beside it.
StatusOr<std::string> ReadLatestTag(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "latest").string();
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return IoError(path + ": " + ec.message());
  if (size > 4096) return CorruptError(path + ": " + std::to_string(size) + " bytes, not one tag name");
  std::ifstream in(path, std::ios::binary);
  std::string tag((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!tag.empty() && (tag.back() == '\n' || tag.back() == '\r' || tag.back() == ' ')) tag.pop_back();
  // Printable ASCII only: the tag is shown in reports, and no byte of a file
  // reaches a terminal unescaped. DeepSpeed's tags are global_stepN or a user's name.
  const bool printable = std::all_of(tag.begin(), tag.end(), [](char c) { return c > ' ' && c < 0x7f; });
  if (tag.empty() || tag == "." || tag == ".." || tag.find('/') != std::string::npos || !printable) {
    return CorruptError(path + ": its " + std::to_string(tag.size()) +
                            " bytes do not name a tag directory beside it (printable, no '/')");
  }
  std::error_code dir_ec;
  if (!std::filesystem::is_directory(std::filesystem::path(dir) / tag, dir_ec)) {
    return NotFoundError(path + " names tag '" + tag + "', which is not a directory beside it");
  }
  return tag;
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
  // DeepSpeed's save_dir: `latest` names the tag directory that holds the files.
  if (out.layout.empty() && has("latest")) {
    OPTSTATE_ASSIGN_OR_RETURN(std::string tag, ReadLatestTag(dir));
    OPTSTATE_ASSIGN_OR_RETURN(FrameworkDir tagged, FindFrameworkFiles((std::filesystem::path(dir) / tag).string()));
    if (tagged.layout == "deepspeed") {
      tagged.tag = tag;
      return tagged;
    }
  }
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
  // What the framework loads from directories inside (DeepSpeed's global_stepN/
  // under HF Trainer, accelerate's pytorch_model/): every file that could be
  // unpickled is checked, as one of no known role. Symlinks are not followed.
  std::vector<std::string> inside;
  auto it = std::filesystem::recursive_directory_iterator(dir, std::filesystem::directory_options::none, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 4) it.disable_recursion_pending();
    if (it.depth() == 0 || !it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    inside.push_back(it->path().string());
  }
  if (ec) return IoError(dir + ": " + ec.message());
  std::sort(inside.begin(), inside.end());
  for (const std::string& path : inside) {
    const bool pickled = path.ends_with(".pt") || path.ends_with(".bin") || path.ends_with(".pth") ||
                         path.ends_with(".pkl") || path.ends_with(".safetensors") || path.ends_with(".ckpt");
    out.files.push_back({"other", path, pickled});
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
