// DCP's .distcp files are torch.save zips back to back; each item is parsed in
// place from a slice, and positions in errors are offsets in the .distcp file.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fixtures.h"
#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "torch/container.h"

namespace optstate {
namespace {

const char* kDcp = "testdata/good/torch26/fsdp2_dcp";

TEST(EmbeddedZipTest, EveryDcpItemParsesInPlace) {
  nlohmann::json want = testing::ExpectedJson(kDcp);
  std::map<std::string, nlohmann::json> meta;
  for (const auto& m : want["state_dict_metadata"]) meta[m["fqn"].get<std::string>()] = m;
  std::map<std::string, std::string> files;
  int tensors = 0, bytes_items = 0;
  for (const auto& item : want["storage_data"]) {
    std::string file = item["relative_path"].get<std::string>();
    if (!files.contains(file)) files[file] = testing::ReadFileOrFail(std::string(kDcp) + "/" + file);
    uint64_t offset = item["file_offset"].get<uint64_t>();
    ByteCursor whole(AsBytes(files[file]));
    StatusOr<ByteCursor> slice = whole.Slice(offset, item["length"].get<uint64_t>(), "item");
    ASSERT_TRUE(slice.ok());
    StatusOr<Checkpoint> cp = ParseCheckpoint(*slice);
    std::string fqn = item["fqn"].get<std::string>();
    ASSERT_TRUE(cp.ok()) << fqn << ": " << cp.status().ToString();
    EXPECT_EQ(ZipDirectory(cp->container).prefix, "archive") << fqn;
    const Node& root = cp->graph.at(cp->graph.root);
    if (meta[fqn]["kind"].get<std::string>() == "bytes") {
      EXPECT_NE(root.kind, NodeKind::kTensor) << fqn;
      ++bytes_items;
      continue;
    }
    ASSERT_EQ(root.kind, NodeKind::kTensor) << fqn;
    const TensorRef& t = cp->tensors[root.tensor];
    size_t chunk = item["index"].get<size_t>();
    EXPECT_EQ(t.sizes, meta[fqn]["chunks"][chunk]["sizes"].get<std::vector<int64_t>>()) << fqn;
    EXPECT_EQ(std::string(GetDTypeInfo(t.dtype).name), meta[fqn]["dtype"].get<std::string>()) << fqn;
    // The storage lies inside this item's slice, not elsewhere in the file.
    StatusOr<ByteSpan> data = StorageBytes(slice->data(), *cp, cp->storages[0]);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    EXPECT_EQ(data->size(), t.nbytes()) << fqn << ": DCP stores exactly the chunk";
    ++tensors;
  }
  EXPECT_GT(tensors, 30);
  EXPECT_GT(bytes_items, 5);
}

TEST(EmbeddedZipTest, ErrorsNameOffsetsInTheDistcpFile) {
  nlohmann::json want = testing::ExpectedJson(kDcp);
  const auto& item = want["storage_data"][0];
  std::string file = testing::ReadFileOrFail(std::string(kDcp) + "/" + item["relative_path"].get<std::string>());
  uint64_t offset = item["file_offset"].get<uint64_t>();
  // The item's data.pkl starts 64 bytes into the item (torch aligns records to 64).
  file[offset + 64] = '\xff';
  ByteCursor whole(AsBytes(file));
  StatusOr<ByteCursor> slice = whole.Slice(offset, item["length"].get<uint64_t>(), "item");
  ASSERT_TRUE(slice.ok());
  Status s = ParseCheckpoint(*slice).status();
  EXPECT_EQ(s.ToString(), "corrupt data: record 'archive/data.pkl': offset " + std::to_string(offset + 64) +
                              ": 0xff: unknown opcode");
}

}  // namespace
}  // namespace optstate
