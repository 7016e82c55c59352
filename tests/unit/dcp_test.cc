// DCP directories: .metadata read as torch reads it (the fixtures'
// .expected.json come from torch's FileSystemReader), hostile metadata refused
// with exact messages, and consolidate equal to torch's dcp_to_torch_save
// tensor for tensor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "fixtures.h"
#include "graph_compare.h"
#include "optstate/checkpoint.h"
#include "optstate/dcp.h"
#include "pickle/graph_walk.h"

namespace optstate {
namespace {

const char* kFixtures[] = {"testdata/good/torch26/fsdp2_dcp", "testdata/good/torch26/fsdp2_3rank_dcp"};

TEST(DcpMetadataTest, ReadsWhatTorchReads) {
  for (const char* fixture : kFixtures) {
    SCOPED_TRACE(fixture);
    nlohmann::json want = testing::ExpectedJson(fixture);
    auto dcp = OpenDcpCheckpoint(testing::RepoPath(fixture));
    ASSERT_TRUE(dcp.ok()) << dcp.status().ToString();
    const DcpMetadata& md = (*dcp)->metadata();
    EXPECT_EQ(md.pickle_protocol, 4);
    ASSERT_EQ(md.entries.size(), want["state_dict_metadata"].size());
    std::map<std::string, std::vector<nlohmann::json>> paths;
    for (const auto& p : want["planner_data"]) paths[p["key"]].push_back(p["path"]);
    std::map<std::pair<std::string, nlohmann::json>, nlohmann::json> where;
    for (const auto& s : want["storage_data"]) where[{s["fqn"], s["offset"]}] = s;
    for (size_t i = 0; i < md.entries.size(); ++i) {
      const DcpEntry& e = md.entries[i];
      const auto& w = want["state_dict_metadata"][i];
      ASSERT_EQ(e.fqn, w["fqn"].get<std::string>());
      nlohmann::json path = nlohmann::json::array();
      for (const DcpPathPart& p : e.path) path.push_back(p.is_index ? nlohmann::json(p.index) : nlohmann::json(p.key));
      EXPECT_EQ(path, paths[e.fqn].at(0)) << e.fqn;
      EXPECT_EQ(e.is_tensor, w["kind"] == "tensor") << e.fqn;
      if (!e.is_tensor) {
        const auto& s = where.at({e.fqn, nullptr});
        EXPECT_EQ(e.bytes_where.relative_path, s["relative_path"].get<std::string>());
        EXPECT_EQ(e.bytes_where.offset, s["file_offset"].get<uint64_t>());
        EXPECT_EQ(e.bytes_where.length, s["length"].get<uint64_t>());
        continue;
      }
      EXPECT_EQ(std::string(GetDTypeInfo(e.dtype).name), w["dtype"].get<std::string>());
      EXPECT_EQ(e.size, w["size"].get<std::vector<int64_t>>()) << e.fqn;
      ASSERT_EQ(e.chunks.size(), w["chunks"].size()) << e.fqn;
      for (size_t c = 0; c < e.chunks.size(); ++c) {
        EXPECT_EQ(e.chunks[c].offsets, w["chunks"][c]["offsets"].get<std::vector<int64_t>>());
        EXPECT_EQ(e.chunks[c].sizes, w["chunks"][c]["sizes"].get<std::vector<int64_t>>());
        const auto& s = where.at({e.fqn, nlohmann::json(e.chunks[c].offsets)});
        EXPECT_EQ(e.chunks[c].where.relative_path, s["relative_path"].get<std::string>());
        EXPECT_EQ(e.chunks[c].where.offset, s["file_offset"].get<uint64_t>());
        EXPECT_EQ(e.chunks[c].where.length, s["length"].get<uint64_t>());
      }
    }
    uint64_t data_files = 0;
    for (const auto& f : want["files"]) data_files += f["name"] != ".metadata";
    EXPECT_EQ((*dcp)->files().size(), data_files);
    EXPECT_EQ(md.checkpoint_id, std::filesystem::path(fixture).filename().string());
  }
}

// The same checkpoint's metadata as other torch versions write it
// (testdata/gen/gen_dcp_variants.py) reads exactly as the original.
TEST(DcpMetadataTest, ReadsOtherVersionsLayouts) {
  auto base = OpenDcpCheckpoint(testing::RepoPath(kFixtures[0]));
  ASSERT_TRUE(base.ok());
  auto describe = [](const DcpMetadata& md) {
    std::string out;
    for (const DcpEntry& e : md.entries) {
      out += e.fqn + " " + DcpPathText(e.path) + " " + std::string(GetDTypeInfo(e.dtype).name) + ShapeText(e.size) +
             DcpLocationText(e.bytes_where);
      for (const DcpChunk& c : e.chunks) out += ShapeText(c.offsets) + ShapeText(c.sizes) + DcpLocationText(c.where);
      out += "\n";
    }
    return out;
  };
  const std::string want = describe((*base)->metadata());
  for (const char* name : {"version_field", "old_properties_path", "no_storage_meta", "protocol_2"}) {
    SCOPED_TRACE(name);
    auto v = OpenDcpCheckpoint(testing::RepoPath(std::string("testdata/dcp_variants/") + name));
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    const DcpMetadata& md = (*v)->metadata();
    EXPECT_EQ(describe(md), want);
    EXPECT_EQ(md.version, std::string(name) == "version_field" ? "1.0.0" : "");
    EXPECT_EQ(md.pickle_protocol, std::string(name) == "protocol_2" ? 2 : 4);
    EXPECT_EQ(md.checkpoint_id.empty(), std::string(name) == "no_storage_meta");
    bool old_path = false;
    for (const GlobalRef& g : md.globals) old_path |= g.module == "torch.distributed._shard.sharded_tensor.metadata";
    EXPECT_EQ(old_path, std::string(name) == "old_properties_path");
  }
}

TEST(DcpMetadataTest, HostileMetadataIsRefused) {
  const std::string dir = testing::RepoPath("testdata/hostile/dcp/");
  const std::map<std::string, std::string> want = {
      {"path_traversal", "corrupt data: " + dir + "path_traversal/.metadata: 'model.emb.weight' is stored in "
                         "'../../../../etc/passwd', a path that leaves the checkpoint directory; refused"},
      {"absolute_path", "corrupt data: " + dir + "absolute_path/.metadata: 'model.emb.weight' is stored in "
                        "'/etc/passwd', a path that leaves the checkpoint directory; refused"},
      {"missing_file", "not found: " + dir + "missing_file/.metadata: 'model.emb.weight' chunk at offsets [5, 0] "
                       "is stored in '__7_0.distcp': " + dir + "missing_file/__7_0.distcp: cannot open: "
                       "No such file or directory"},
      {"offset_past_end", "truncated input: " + dir + "offset_past_end/.metadata: 'model.emb.weight' chunk at "
                          "offsets [5, 0] is stored at __1_0.distcp bytes 10000000..10001244, but __1_0.distcp "
                          "has only 52304 bytes"},
      {"overlapping_chunks", "corrupt data: " + dir + "overlapping_chunks/.metadata: 'model.emb.weight' chunk 1 "
                             "(offsets [3, 0], sizes [5, 6]) overlaps chunk 0 (offsets [0, 0], sizes [5, 6])"},
      {"gap_between_chunks", "corrupt data: " + dir + "gap_between_chunks/.metadata: 'model.emb.weight': its "
                             "chunks cover 54 of 60 elements of [10, 6]; the rest is missing"},
      {"chunk_outside_tensor", "corrupt data: " + dir + "chunk_outside_tensor/.metadata: 'model.emb.weight' "
                               "chunk 1 (offsets [5, 0], sizes [6, 6]) reaches outside the tensor [10, 6]"},
      // Only allowed names, but getattr(PosixPath(p), 'write_text') called: plain pickle.load would write a file.
      {"getattr_called_result", "unsupported: " + dir + "getattr_called_result/.metadata: offset 16083: getattr on "
                                "something other than a memory-format enum member, which no DCP .metadata does; "
                                "refused without loading"},
  };
  for (const auto& [name, message] : want) {
    auto dcp = OpenDcpCheckpoint(dir + name);
    ASSERT_FALSE(dcp.ok()) << name;
    EXPECT_EQ(dcp.status().ToString(), message);
  }
  auto dcp = OpenDcpCheckpoint(dir + "os_system_global");
  ASSERT_FALSE(dcp.ok());
  EXPECT_EQ(dcp.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(dcp.status().ToString().find(".system is not one of the classes a DCP .metadata uses; refused"),
            std::string::npos)
      << dcp.status().ToString();
  EXPECT_EQ(OpenDcpCheckpoint(testing::RepoPath("testdata/good/torch26")).status().ToString(),
            "not found: " + testing::RepoPath("testdata/good/torch26") +
                ": no .metadata file; not a DCP checkpoint directory, or its save did not finish");
}

// Every tensor of our consolidated file holds the same bytes as the one at the
// same path in torch's dcp_to_torch_save output, and the structure matches.
TEST(DcpConsolidateTest, EqualsTorchsDcpToTorchSave) {
  for (const char* fixture : kFixtures) {
    SCOPED_TRACE(fixture);
    auto dcp = OpenDcpCheckpoint(testing::RepoPath(fixture));
    ASSERT_TRUE(dcp.ok()) << dcp.status().ToString();
    std::string out = ::testing::TempDir() + "/consolidated.pt";
    auto report = ConsolidateDcp(**dcp, out);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->bytes_items, 11u);
    EXPECT_EQ(report->largest_tensor_bytes, 0u) << "FSDP2's dim-0 chunks are copied, never assembled";
    EXPECT_TRUE(report->write.unsafe_globals.empty());
    ReadOptions check;
    check.verify_crc = true;  // record CRCs are combined from the chunks' own: they must be right
    auto ours = OpenCheckpoint(out, check);
    auto theirs = OpenCheckpoint(testing::RepoPath(std::string(fixture) + ".consolidated.pt"));
    ASSERT_TRUE(ours.ok()) << ours.status().ToString();
    ASSERT_TRUE(theirs.ok());
    auto ours_tree = testing::FlattenValues(**ours);
    auto theirs_tree = testing::FlattenValues(**theirs);
    EXPECT_EQ(ours_tree.size(), 73u);
    EXPECT_EQ(ours_tree, theirs_tree);
  }
}

TEST(DcpConsolidateTest, ToIndexKeysStateInParamGroupOrder) {
  auto dcp = OpenDcpCheckpoint(testing::RepoPath(kFixtures[1]));
  ASSERT_TRUE(dcp.ok());
  std::string out = ::testing::TempDir() + "/consolidated_index.pt";
  ConsolidateOptions options;
  options.keys = ConsolidateKeys::kIndex;
  auto report = ConsolidateDcp(**dcp, out, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->optimizer_states, 1u);
  EXPECT_TRUE(report->unlisted_state.empty());
  auto file = OpenCheckpoint(out);
  ASSERT_TRUE(file.ok());
  const ObjectGraph& g = (*file)->checkpoint().graph;
  auto state = FindPath(g, g.root, "optim.state");
  auto params = FindPath(g, g.root, "optim.param_groups[0].params");
  ASSERT_TRUE(state && params);
  EXPECT_EQ(ValueText(g, *params), "[0, 1, 2, 3, 4, 5, 6, 7, 8]");
  std::string keys;
  for (auto [k, v] : g.at(*state).entries) keys += ValueText(g, k) + " ";
  EXPECT_EQ(keys, "0 1 2 3 4 5 6 7 8 ");
}

// verify's scratch consolidation: a torch.save file while the object lives,
// nothing left after, and nothing left when consolidation fails.
TEST(DcpConsolidateTest, ScratchCopyIsRemovedWithIt) {
  const std::string parent = ::testing::TempDir() + "consolidated-scratch-" + std::to_string(::getpid());
  std::filesystem::create_directories(parent);
  std::string path;
  {
    auto c = ConsolidateDcpToScratch(testing::RepoPath("testdata/good/torch26/fsdp2_dcp"), parent, {});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    path = c->file.path;
    EXPECT_EQ(c->report.tensors, 36u);
    auto f = OpenCheckpoint(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  auto bad = ConsolidateDcpToScratch(testing::RepoPath("testdata/hostile/dcp/missing_file"), parent, {});
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(std::filesystem::is_empty(parent));
  std::filesystem::remove_all(parent);
}

}  // namespace
}  // namespace optstate
