// Framework checkpoint directories: each file's role from its name, the
// layout from the files that only one framework writes, and what is missing.
#include "optstate/validate.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace optstate {
namespace {

std::string MakeDir(const std::string& name, const std::vector<std::string>& files) {
  std::string dir = (std::filesystem::temp_directory_path() / ("optstate-fwdir-" + name)).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const std::string& f : files) std::ofstream(dir + "/" + f) << "x";
  return dir;
}

std::vector<std::string> Roles(const FrameworkDir& d) {
  std::vector<std::string> out;
  for (const FrameworkFile& f : d.files) {
    out.push_back(std::filesystem::path(f.path).filename().string() + "=" + f.role + (f.checkpoint ? "" : "(listed)"));
  }
  return out;
}

TEST(FrameworkDirTest, HfTrainerFilesByName) {
  std::string dir = MakeDir("hf", {"trainer_state.json", "model-00001-of-00002.safetensors", "pytorch_model.bin",
                                   "optimizer.pt", "scheduler.pt", "rng_state_3.pth", "scaler.pt", "modelx.bin",
                                   "optimizer_.pt", "training_args.bin"});
  auto d = FindFrameworkFiles(dir);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->layout, "hf-trainer");
  EXPECT_EQ(Roles(*d), (std::vector<std::string>{
                           "model-00001-of-00002.safetensors=model", "modelx.bin=other", "optimizer.pt=optimizer",
                           "optimizer_.pt=other", "pytorch_model.bin=model", "rng_state_3.pth=rng",
                           "scaler.pt=scaler", "scheduler.pt=scheduler", "trainer_state.json=other(listed)",
                           "training_args.bin=other"}));
  EXPECT_TRUE(d->missing.empty());
  std::filesystem::remove_all(dir);
}

TEST(FrameworkDirTest, AccelerateAndDeepSpeedAndMissingFiles) {
  std::string acc = MakeDir("acc", {"optimizer_1.bin", "random_states_0.pkl", "sampler.bin"});
  auto a = FindFrameworkFiles(acc);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->layout, "accelerate");
  EXPECT_EQ(Roles(*a), (std::vector<std::string>{"optimizer_1.bin=optimizer", "random_states_0.pkl=rng",
                                                 "sampler.bin=sampler"}));
  EXPECT_EQ(a->missing, (std::vector<std::string>{"model (model.safetensors or pytorch_model.bin)"}));
  std::string ds = MakeDir("ds", {"mp_rank_00_model_states.pt", "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"});
  auto d = FindFrameworkFiles(ds);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->layout, "deepspeed");
  EXPECT_EQ(Roles(*d), (std::vector<std::string>{"bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt=optimizer",
                                                 "mp_rank_00_model_states.pt=model"}));
  std::string none = MakeDir("none", {"notes.txt"});
  EXPECT_EQ(FindFrameworkFiles(none).status().code(), StatusCode::kNotFound);
  for (const std::string& dir : {acc, ds, none}) std::filesystem::remove_all(dir);
}

// DeepSpeed's save_dir: `latest` names the tag directory; a name that leaves
// the directory, is not printable, or names nothing is refused, naming the file.
TEST(FrameworkDirTest, DeepSpeedLatestNamesTheTag) {
  std::string dir = MakeDir("ds-save", {});
  std::filesystem::create_directories(dir + "/global_step7");
  std::ofstream(dir + "/global_step7/mp_rank_00_model_states.pt") << "x";
  std::ofstream(dir + "/global_step7/zero_pp_rank_0_mp_rank_00_optim_states.pt") << "x";
  std::ofstream(dir + "/latest") << "global_step7\n";
  auto fd = FindFrameworkFiles(dir);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(fd->layout, "deepspeed");
  EXPECT_EQ(fd->tag, "global_step7");
  EXPECT_EQ(Roles(*fd), (std::vector<std::string>{"mp_rank_00_model_states.pt=model",
                                                  "zero_pp_rank_0_mp_rank_00_optim_states.pt=optimizer"}));
  for (const std::string& bad : {std::string("../global_step7"), std::string("global\x1b[2Jstep7"),
                                 std::string("global_step8")}) {
    SCOPED_TRACE(bad);
    std::ofstream(dir + "/latest", std::ios::trunc) << bad;
    auto refused = FindFrameworkFiles(dir);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find(dir + "/latest"), std::string::npos) << refused.status().ToString();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace optstate
