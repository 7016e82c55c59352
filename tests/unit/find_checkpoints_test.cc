// FindCheckpoints (validate --each): which paths under a tree are checkpoints,
// in what order, and what is said about the rest.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fixtures.h"
#include "optstate/validate.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

using Paths = std::vector<std::string>;

// root/a.pt, root/dcp/ (a DCP directory), root/sub/c.pt: checkpoints;
// root/notes.txt: not one; root/.hidden/b.pt and root/link -> sub: not looked at;
// root/empty/: nothing in it.
std::string MakeTree() {
  const std::string root = ::testing::TempDir() + "/find_checkpoints_test";
  fs::remove_all(root);
  const std::string pt = testing::RepoPath("testdata/good/torch26/adamw_index.pt");
  fs::create_directories(root + "/sub");
  fs::create_directories(root + "/.hidden");
  fs::create_directories(root + "/empty");
  fs::copy_file(pt, root + "/a.pt");
  fs::copy_file(pt, root + "/sub/c.pt");
  fs::copy_file(pt, root + "/.hidden/b.pt");
  fs::copy(testing::RepoPath("testdata/good/torch26/fsdp2_dcp"), root + "/dcp", fs::copy_options::recursive);
  fs::create_directory_symlink("sub", root + "/link");
  std::ofstream(root + "/notes.txt") << "not a checkpoint";
  return root;
}

TEST(FindCheckpointsTest, WalksInNameOrderSkippingWhatIsNoCheckpoint) {
  const std::string root = MakeTree();
  auto found = FindCheckpoints({root});
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->checkpoints, (Paths{root + "/a.pt", root + "/dcp", root + "/sub/c.pt"}));
  EXPECT_EQ(found->skipped, Paths{root + "/notes.txt"});
  EXPECT_TRUE(found->empty_directories.empty());
}

TEST(FindCheckpointsTest, PathsGivenKeepTheirOrderAndFilesAlwaysCount) {
  const std::string root = MakeTree();
  auto found = FindCheckpoints({root + "/notes.txt", root + "/dcp", root + "/empty", root + "/a.pt"});
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  // A file named directly is validate's to judge (it says what the file is).
  EXPECT_EQ(found->checkpoints, (Paths{root + "/notes.txt", root + "/dcp", root + "/a.pt"}));
  EXPECT_EQ(found->empty_directories, Paths{root + "/empty"});
}

// validate checks a framework's directory as one; inspect shows its files.
TEST(FindCheckpointsTest, FrameworkDirectoriesWholeOrWalked) {
  const std::string root = ::testing::TempDir() + "/find_checkpoints_framework";
  fs::remove_all(root);
  fs::create_directories(root);
  fs::copy(testing::RepoPath("testdata/frameworks/dirs_torch26/hf_trainer/checkpoint-6"), root + "/checkpoint-6",
           fs::copy_options::recursive);
  auto whole = FindCheckpoints({root});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->checkpoints, Paths{root + "/checkpoint-6"});
  FindCheckpointsOptions walked;
  walked.framework_directories = false;
  auto files = FindCheckpoints({root}, walked);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  const std::string dir = root + "/checkpoint-6/";
  EXPECT_EQ(files->checkpoints, (Paths{dir + "model.safetensors", dir + "optimizer.pt", dir + "rng_state.pth",
                                       dir + "scheduler.pt", dir + "training_args.bin"}));
  EXPECT_EQ(files->skipped, Paths{dir + "trainer_state.json"});
}

TEST(FindCheckpointsTest, MissingPathIsAnError) {
  const std::string root = MakeTree();
  auto found = FindCheckpoints({root + "/a.pt", root + "/missing"});
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().ToString(), "not found: " + root + "/missing: no such file or directory");
}

}  // namespace
}  // namespace optstate
