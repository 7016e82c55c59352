// Remap through the library: round trips give identical bytes, and remapping a
// canonical file changes nothing but the packing.
#include "optstate/collisions.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "fixtures.h"
#include "optstate/checkpoint_writer.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Remaps `in` to `out` (same file name in another directory, so archive names agree).
Status Remap(const std::string& in, const std::string& out, const std::string& manifest, KeyTarget to,
             const std::string& state_key = "") {
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointFile> f, OpenCheckpoint(in));
  OPTSTATE_ASSIGN_OR_RETURN(OptimizerState st, ReadOptimizerState(f->checkpoint(), state_key));
  OPTSTATE_ASSIGN_OR_RETURN(std::vector<ParamInfo> params, ReadParamManifest(manifest));
  OPTSTATE_ASSIGN_OR_RETURN(MatchReport m, MatchState(f->checkpoint(), st, params));
  RemapOptions o;
  o.to = to;
  OPTSTATE_ASSIGN_OR_RETURN(RemapResult r, RemapState(f->checkpoint(), st, params, m, o));
  return WriteCheckpoint(*f, r.checkpoint, r.checkpoint.graph.root, out).status();
}

class StateRemapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("optstate-remap-" + std::to_string(::getpid()));
    for (const char* d : {"a", "b", "c", "d"}) fs::create_directories(dir_ / d);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& rel) { return (dir_ / rel).string(); }
  fs::path dir_;
};

TEST_F(StateRemapTest, IndexToFqnToIndexGivesTheSameBytes) {
  std::string manifest = testing::RepoPath("testdata/good/torch113/heavyball_ptr_shape.manifest.json");
  ASSERT_TRUE(Remap(testing::RepoPath("testdata/good/torch113/heavyball_ptr_shape.pt"), P("a/x.pt"), manifest,
                    KeyTarget::kIndex).ok());
  ASSERT_TRUE(Remap(P("a/x.pt"), P("b/x.pt"), manifest, KeyTarget::kFqn).ok());
  ASSERT_TRUE(Remap(P("b/x.pt"), P("c/x.pt"), manifest, KeyTarget::kIndex).ok());
  EXPECT_EQ(Slurp(P("a/x.pt")), Slurp(P("c/x.pt")));
  EXPECT_NE(Slurp(P("a/x.pt")), Slurp(P("b/x.pt")));  // the FQN form really differs
}

TEST_F(StateRemapTest, ZstdOutputHoldsTheSameZip) {
  std::string in = testing::RepoPath("testdata/good/torch113/heavyball_ptr_shape.pt");
  auto file = OpenCheckpoint(in);
  ASSERT_TRUE(file.ok());
  WriteOptions zstd;
  zstd.zstd = true;
  ASSERT_TRUE(WriteCheckpoint(**file, (*file)->checkpoint().graph.root, P("a/x.pt")).ok());
  StatusOr<WriteReport> r = WriteCheckpoint(**file, (*file)->checkpoint().graph.root, P("b/x.pt.zst"), zstd);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bytes, fs::file_size(P("b/x.pt.zst")));
  EXPECT_LT(r->bytes, fs::file_size(P("a/x.pt")));
  // Reading the .zst gives back exactly the plain zip's bytes.
  auto back = OpenCheckpoint(P("b/x.pt.zst"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::string(AsChars((*back)->bytes())), Slurp(P("a/x.pt")));
}

TEST_F(StateRemapTest, CanonicalFileKeepsItsContentThroughRemap) {
  // adamw_index.pt is already keyed by index: remapping changes no value, only the packing.
  std::string manifest = testing::RepoPath("testdata/good/torch113/heavyball_ptr_shape.manifest.json");
  std::string in = testing::RepoPath("testdata/good/torch113/adamw_index.pt");
  ASSERT_TRUE(Remap(in, P("d/adamw_index.pt"), manifest, KeyTarget::kIndex).ok());
  auto file = OpenCheckpoint(in);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(WriteCheckpoint(**file, (*file)->checkpoint().graph.root, P("a/adamw_index.pt")).ok());
  EXPECT_EQ(Slurp(P("d/adamw_index.pt")), Slurp(P("a/adamw_index.pt")));  // same as a plain repack
}

}  // namespace
}  // namespace optstate
