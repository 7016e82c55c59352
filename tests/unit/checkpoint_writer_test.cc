// Round trip: every fixture, written back by optstate's writer, reads exactly
// as the original did in Python (its .expected.json). tests/interop/ checks the
// same outputs with real torch 1.13 and 2.6 (weights_only=True).
#include "optstate/checkpoint_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "fixtures.h"
#include "graph_compare.h"
#include "io/byte_cursor.h"
#include "pickle/pickle_vm.h"
#include "torch/container.h"
#include "zip/zip_archive.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointWriterTest, EveryFixtureRoundTrips) {
  fs::path dir = fs::temp_directory_path() / ("optstate-writer-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int written = 0;
  for (const std::string& fixture : testing::AllFixtures()) {
    SCOPED_TRACE(fixture);
    auto in = OpenCheckpoint(testing::RepoPath(fixture));
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    std::string out = (dir / "out.pt").string();
    fs::remove(out);
    StatusOr<WriteReport> report = WriteCheckpoint(**in, (*in)->checkpoint().graph.root, out);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    bool dtensors = std::any_of((*in)->checkpoint().tensors.begin(), (*in)->checkpoint().tensors.end(),
                                [](const TensorRef& t) { return t.is_dtensor; });
    if (dtensors) {
      // Written back as the calls that built them; torch 2.6 accepts these
      // classes under weights_only=True only once torch.distributed.tensor is imported.
      EXPECT_EQ(report->unsafe_globals,
                (std::vector<std::string>{"torch.distributed.tensor.DTensor",
                                          "torch.distributed.tensor._dtensor_spec.DTensorSpec",
                                          "torch.distributed.device_mesh.DeviceMesh",
                                          "torch.distributed.tensor.placement_types.Shard",
                                          "torch.distributed.tensor._dtensor_spec.TensorMeta"}));
    } else {
      EXPECT_TRUE(report->unsafe_globals.empty());
    }
    ReadOptions verify;
    verify.verify_crc = true;
    auto back = OpenCheckpoint(out, verify);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    for (const ZipEntry& e : ZipDirectory((*back)->checkpoint().container).entries) {
      EXPECT_EQ(e.data_offset % 64, 0u) << e.name;
    }
    nlohmann::json want = testing::ExpectedJson(fixture);
    testing::GraphComparer cmp((*back)->checkpoint().graph, back->get());
    EXPECT_EQ(cmp.Compare((*back)->checkpoint().graph.root, want["root"], "$"), "");
    EXPECT_EQ(cmp.CompareStorages(want["storages"]), "");
    EXPECT_EQ(report->bytes, fs::file_size(out));
    ++written;
  }
  fs::remove_all(dir);
  EXPECT_GE(written, 30);
}

// The reader makes one node for each recurring int and short str (and for
// None, booleans and ()); the writer writes every occurrence afresh, as the
// pickler did, not as a memo reference to the first.
TEST(CheckpointWriterTest, SharedValuesAreWrittenAtEachOccurrence) {
  const std::string pickle("\x80\x02(K\x10K\x10X\x03\x00\x00\x00" "cpuX\x03\x00\x00\x00" "cpuNN\x89\x89t.", 29);
  ByteCursor cursor(AsBytes(pickle));
  StatusOr<PickleResult> read = ReadPickle(cursor);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_LT(read->graph.nodes.size(), 8u) << "the reader shares the repeats";
  Checkpoint cp;
  cp.graph = std::move(read->graph);
  std::string out = (fs::temp_directory_path() / ("optstate-shared-" + std::to_string(::getpid()) + ".pt")).string();
  auto no_storages = [](size_t) -> StatusOr<ByteSpan> { return InternalError("no storages here"); };
  StatusOr<WriteReport> report = WriteNewCheckpoint(cp, cp.graph.root, out, no_storages);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::ifstream in(out, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ByteCursor zip(AsBytes(file));
  StatusOr<ZipArchive> archive = ReadZipDirectory(zip);
  ASSERT_TRUE(archive.ok()) << archive.status().ToString();
  const ZipEntry* entry = archive->Find("data.pkl");
  ASSERT_NE(entry, nullptr);
  StatusOr<ByteSpan> data = ZipEntryData(zip, *entry);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  std::string written(AsChars(*data));
  EXPECT_EQ(written, pickle);
  fs::remove(out);
}

TEST(CheckpointWriterTest, HostileInputIsCarriedButReported) {
  auto in = OpenCheckpoint(testing::RepoPath("testdata/hostile/os_system_global.pt"));
  ASSERT_TRUE(in.ok());
  std::string out = (fs::temp_directory_path() / ("optstate-hostile-" + std::to_string(::getpid()) + ".pt")).string();
  StatusOr<WriteReport> report = WriteCheckpoint(**in, (*in)->checkpoint().graph.root, out);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->unsafe_globals, std::vector<std::string>{"posix.system"});
  fs::remove(out);
}

}  // namespace
}  // namespace optstate
