// safetensors read in place: tensors at their header's ranges; every malformed
// header refused with the tensor and offset named, nothing read past the data.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "optstate/checkpoint.h"

#include "io/byte_cursor.h"
#include "torch/container.h"

namespace optstate {
namespace {

// 8-byte little-endian header length, the header, then `data`.
std::string File(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

StatusOr<Checkpoint> Parse(const std::string& bytes) {
  return ParseCheckpoint(ByteCursor(ByteSpan(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size())),
                         ReadOptions());
}

TEST(SafetensorsTest, TensorsLieAtTheirRanges) {
  float w[2] = {1.5f, -2.0f};
  std::string data(reinterpret_cast<const char*>(w), sizeof w);
  data += std::string("\x07\x00", 2);  // an I16 [1]
  const std::string file = File(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],)"
                                R"("data_offsets":[0,8]},"s":{"dtype":"I16","shape":[1],"data_offsets":[8,10]}})",
                                data);
  auto cp = Parse(file);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  EXPECT_EQ(cp->container.format, ContainerFormat::kSafetensors);
  NodeId w_node = DictLookup(cp->graph, cp->graph.root, "w");
  ASSERT_NE(w_node, kNoNode);
  const TensorRef& t = cp->tensors[cp->graph.at(w_node).tensor];
  EXPECT_EQ(t.dtype, DType::kFloat32);
  EXPECT_EQ(t.sizes, (std::vector<int64_t>{2}));
  ByteSpan all(reinterpret_cast<const std::byte*>(file.data()), file.size());
  auto values = ReadTensorAsFloat(all, *cp, t);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(*values, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(DictLookup(cp->graph, cp->graph.root, "__metadata__"), kNoNode);
}

TEST(SafetensorsTest, MalformedHeadersAreRefusedWithTheirPlace) {
  const std::string eight(8, '\0');
  struct Case {
    std::string header, data, message;
  } cases[] = {
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0'),
       "safetensors tensor 'w': bytes [0, 8) of the data lie outside its 4 bytes (file offset 62)"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight,
       "safetensors tensor 'w': 8 bytes at file offset 62 for 3 float32 elements"},
      {R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", eight,
       "safetensors tensor 'w': dtype 'Q4' is not read"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", eight,
       "safetensors tensor 'w': its header entry lacks dtype, shape or data_offsets [begin, end]"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight,
       "safetensors tensor 'w': a dimension is not a non-negative integer"},
      {R"({"w": oops})", eight, "safetensors header (bytes 8-19) is not a JSON object"},
  };
  for (const Case& c : cases) {
    auto cp = Parse(File(c.header, c.data));
    ASSERT_FALSE(cp.ok()) << c.header;
    EXPECT_NE(cp.status().message().find(c.message), std::string::npos) << cp.status().ToString();
  }
}

TEST(SafetensorsTest, AHeaderLongerThanTheFileIsNotSafetensors) {
  std::string file = File(R"({"w":{}})", "");
  file[0] = '\x7f';  // declares 127 header bytes; the file has 8
  auto cp = Parse(file);
  ASSERT_FALSE(cp.ok());
  EXPECT_EQ(cp.status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace optstate
