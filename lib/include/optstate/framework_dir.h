// The files of a training framework's checkpoint directory, found by each
// framework's naming conventions: HF Trainer's checkpoint-N/, accelerate's
// save_state directory, DeepSpeed's global_stepN/. What each file is for
// decides how it is checked (the optimizer against the model beside it).
#ifndef OPTSTATE_FRAMEWORK_DIR_H_
#define OPTSTATE_FRAMEWORK_DIR_H_

#include <string>
#include <vector>

#include "optstate/status.h"

namespace optstate {

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

}  // namespace optstate

#endif  // OPTSTATE_FRAMEWORK_DIR_H_
