// The graph's containers behave as the std types they replace: a pickle graph
// of 10^7 nodes relies on them for every field it reads.
#include "optstate/chunked_arena.h"
#include "optstate/compact_containers.h"
#include "optstate/pickle_graph.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace optstate {
namespace {

TEST(ChunkedArenaTest, IndexesAcrossChunkBoundariesAndNeverMoves) {
  ChunkedArena<std::string> arena;
  std::vector<const std::string*> where;
  // Chunks hold 64, 128, 256, ...: 64, 192, 448, 960 are the first elements of chunks 1-4.
  for (int i = 0; i < 5000; ++i) {
    arena.emplace_back(std::to_string(i));
    where.push_back(&arena.back());
  }
  ASSERT_EQ(arena.size(), 5000u);
  for (int i : {0, 63, 64, 191, 192, 447, 448, 959, 960, 4999}) {
    EXPECT_EQ(arena[i], std::to_string(i)) << i;
    EXPECT_EQ(&arena[i], where[i]) << i << ": appending moved an element";
  }
  size_t n = 0;
  for (const std::string& s : arena) EXPECT_EQ(s, std::to_string(n++));
  EXPECT_EQ(n, 5000u);
  ChunkedArena<std::string> copy = arena;
  arena[7] = "changed";
  EXPECT_EQ(copy[7], "7");
  ChunkedArena<std::string> moved = std::move(copy);
  EXPECT_EQ(moved.size(), 5000u);
  EXPECT_EQ(moved[4999], "4999");
}

// Truncating destroys the tail (each element once) and frees the chunks past
// it; the arena then grows again from there.
TEST(ChunkedArenaTest, TruncateDestroysTheTailAndGrowsAgain) {
  ChunkedArena<std::string> arena;
  for (int i = 0; i < 100000; ++i) arena.emplace_back(std::string(40, 'x') + std::to_string(i));
  arena.Truncate(200000);  // past the end: nothing
  EXPECT_EQ(arena.size(), 100000u);
  arena.Truncate(1000);
  ASSERT_EQ(arena.size(), 1000u);
  EXPECT_EQ(arena[999], std::string(40, 'x') + "999");
  for (int i = 0; i < 5000; ++i) arena.emplace_back("again" + std::to_string(i));
  EXPECT_EQ(arena[999], std::string(40, 'x') + "999");
  EXPECT_EQ(arena[1000], "again0");
  EXPECT_EQ(arena[5999], "again4999");
  arena.Truncate(0);
  EXPECT_TRUE(arena.empty());
  arena.emplace_back("first");
  EXPECT_EQ(arena[0], "first");
  // Nodes of 56 bytes in chunks mapped on their own: the kept ones keep their values.
  ChunkedArena<Node> nodes;
  for (int i = 0; i < 200000; ++i) nodes.emplace_back().int_value = i;
  nodes.Truncate(70000);
  for (int i : {0, 65471, 65472, 69999}) EXPECT_EQ(nodes[i].int_value, i) << i;
  nodes.emplace_back().int_value = -1;
  EXPECT_EQ(nodes[70000].int_value, -1);
}

// CompactGraph keeps the marked nodes in order, renumbering every reference.
TEST(CompactGraphTest, KeepsMarkedNodesAndRenumbersReferences) {
  ObjectGraph g;
  auto add = [&](NodeKind k) {
    g.nodes.emplace_back().kind = k;
    return static_cast<NodeId>(g.nodes.size() - 1);
  };
  NodeId dead0 = add(NodeKind::kInt);                 // 0
  NodeId key = add(NodeKind::kStr);                   // 1 -> 0
  NodeId dead2 = add(NodeKind::kTuple);               // 2
  NodeId callable = add(NodeKind::kGlobal);           // 3 -> 1
  NodeId call = add(NodeKind::kObject);               // 4 -> 2
  NodeId list = add(NodeKind::kList);                 // 5 -> 3
  NodeId root = add(NodeKind::kDict);                 // 6 -> 4
  NodeId storage = add(NodeKind::kStorage);           // 7 -> 5
  EXPECT_EQ(g.at(storage).args(), kNoNode);           // none until set
  g.at(storage).storage = 9;
  g.at(storage).set_args(callable);  // held in the node, beside the index
  g.at(key).text = "k";
  g.at(dead2).items = {dead0};
  g.at(callable).set_global("m", "f");
  g.at(call).set_callable(callable);
  g.at(list).items = {call, key};
  g.at(root).entries.emplace_back(key, list);
  g.at(root).entries.emplace_back(key, storage);
  g.at(root).set_class_name("collections.OrderedDict");  // a container's class: in its own text
  g.root = root;
  std::vector<bool> keep = {false, true, false, true, true, true, true, true};
  EXPECT_EQ(CompactGraph(g, keep), 6u);
  ASSERT_EQ(g.nodes.size(), 6u);
  EXPECT_EQ(g.at(5).args(), 1u);
  EXPECT_EQ(g.at(5).storage, 9u);
  EXPECT_FALSE(g.at(5).has_extra());
  EXPECT_EQ(g.at(4).entries[1], Entry(0, 5));
  EXPECT_EQ(g.root, 4u);
  EXPECT_EQ(g.at(4).entries[0], Entry(0, 3));
  EXPECT_EQ(g.at(0).text, "k");
  EXPECT_EQ(g.at(3).items, (CompactList<NodeId>{2, 0}));
  EXPECT_EQ(g.at(2).callable(), 1u);
  EXPECT_FALSE(g.at(2).has_extra());
  EXPECT_EQ(g.at(4).class_name(), "collections.OrderedDict");
  EXPECT_FALSE(g.at(4).has_extra());
  EXPECT_EQ(g.at(1).name(), "f");
}

// Across many words of the kept-node bitmap: node i is kept when i % 3 == 1
// or i is 63, 64 or 199, and each kept node refers to the kept node before it.
TEST(CompactGraphTest, RenumbersAcrossManyWordsOfKeptNodes) {
  ObjectGraph g;
  std::vector<bool> keep(200, false);
  std::vector<NodeId> kept;
  for (NodeId i = 0; i < 200; ++i) {
    Node& n = g.nodes.emplace_back();
    n.kind = NodeKind::kInt;  // its value tells it apart; the items are what is renumbered
    n.int_value = i;
    if (i % 3 == 1 || i == 63 || i == 64 || i == 199) {
      keep[i] = true;
      if (!kept.empty()) n.items = {kept.back()};
      kept.push_back(i);
    }
  }
  g.root = 199;
  ASSERT_EQ(CompactGraph(g, keep), kept.size());
  ASSERT_EQ(g.nodes.size(), kept.size());
  EXPECT_EQ(g.root, kept.size() - 1);
  for (NodeId j = 0; j < kept.size(); ++j) {
    EXPECT_EQ(g.at(j).int_value, kept[j]) << j;
    if (j > 0) {
      EXPECT_EQ(g.at(j).items, (CompactList<NodeId>{j - 1})) << j;
    }
  }
}

// Chunks of 2 MiB and more are mapped on 2 MiB boundaries so the kernel can back
// them with huge pages; smaller ones come from the heap at the type's alignment.
TEST(ChunkedArenaTest, LargeChunksStartOnHugePageBoundaries) {
  constexpr size_t kHuge = size_t{2} << 20;
  for (size_t bytes : {kHuge, 3 * kHuge + 4096, 16 * kHuge}) {
    auto* chunk = static_cast<unsigned char*>(AllocateArenaChunk(bytes, 8));
    ASSERT_NE(chunk, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(chunk) % kHuge, 0u) << bytes;
    chunk[0] = 1;
    chunk[bytes - 1] = 2;  // the whole requested range is writable
    EXPECT_EQ(chunk[0] + chunk[bytes - 1], 3);
    FreeArenaChunk(chunk, bytes, 8);
  }
  void* small = AllocateArenaChunk(7680, 16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 16, 0u);
  FreeArenaChunk(small, 7680, 16);
  // 40,000 nodes of 120 bytes reach chunk 9 (2^15 elements, 3.75 MiB): elements stay addressable.
  struct Wide {
    char bytes[120];
  };
  ChunkedArena<Wide> arena;
  for (int i = 0; i < 40000; ++i) arena.emplace_back().bytes[0] = static_cast<char>(i % 101);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&arena[32704]) % kHuge, 0u) << "the first element of a 3.75 MiB chunk";
  for (int i : {0, 32703, 32704, 39999}) EXPECT_EQ(arena[i].bytes[0], static_cast<char>(i % 101)) << i;
}

// Whether each page of [begin, begin + bytes) is in memory (mincore).
std::vector<bool> Resident(const void* begin, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (mincore(const_cast<void*>(begin), bytes, in.data()) != 0) return {};
  std::vector<bool> out;
  for (unsigned char c : in) out.push_back((c & 1) != 0);
  return out;
}

TEST(ChunkedArenaTest, FaultsInPagesAheadOfTheFillerOnAThreadOfItsOwn) {
  void* probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  const bool supported = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(probe, 4096);
  if (!supported) GTEST_SKIP() << "no MADV_POPULATE_WRITE (Linux < 5.14): the arena asks for nothing";
  // uint64_t elements: chunk 14 holds 2^20 of them (8 MiB) from element 2^20 - 64.
  constexpr size_t kChunk14 = (size_t{1} << 20) - 64;
  ChunkedArena<uint64_t> arena;
  for (size_t i = 0; i < kChunk14 + 1000; ++i) arena.push_back(i);
  // The filler is 8 KB into the chunk; the page 6 MiB on, and the chunk's last
  // page, are pages nothing wrote. They come into memory without a write.
  const char* six_ahead = reinterpret_cast<const char*>(&arena[kChunk14 + 1000]) + (size_t{6} << 20);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const void* probe_at = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(six_ahead) & ~(page - 1));
  const void* last_page =
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(&arena[kChunk14 + (size_t{1} << 20) - 1]) & ~(page - 1));
  bool ahead = false;
  for (int wait = 0; wait < 500 && !ahead; ++wait) {
    std::vector<bool> a = Resident(probe_at, page), b = Resident(last_page, page);
    ahead = !a.empty() && a[0] && !b.empty() && b[0];
    if (!ahead) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ahead) << "pages ahead of the last element were never faulted in";
  for (size_t i : {size_t{0}, kChunk14 - 1, kChunk14, kChunk14 + 999}) EXPECT_EQ(arena[i], i) << i;
  arena.Truncate(10);  // stops the thread first: a fault-in after the tail is given back would take it again
  EXPECT_EQ(arena.size(), 10u);
  EXPECT_EQ(arena[9], 9u);
}

TEST(CompactTextTest, ReadsAsAString) {
  CompactText empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty, "");
  EXPECT_EQ(std::string(empty.data()), "");
  CompactText t = std::string("exp_avg");
  EXPECT_EQ(t.size(), 7u);
  EXPECT_EQ(t, "exp_avg");
  EXPECT_NE(t, "exp_avg_sq");
  EXPECT_TRUE(t.starts_with("exp"));
  EXPECT_EQ(t.substr(4), "avg");
  EXPECT_EQ("state." + t + "!", "state.exp_avg!");
  std::string as_string = t;
  EXPECT_EQ(as_string, "exp_avg");
  CompactText with_nul(std::string_view("a\0b", 3));
  EXPECT_EQ(with_nul.size(), 3u);
  EXPECT_EQ(with_nul.view(), std::string_view("a\0b", 3));
  CompactText copy = t;
  t = "other";
  EXPECT_EQ(copy, "exp_avg");
  EXPECT_LT(copy, t);
}

// Texts of up to 7 bytes are held in the object's own 8 bytes (no malloc);
// 8 and more on the heap; assignment moves between the two forms.
TEST(CompactTextTest, ShortTextsLiveInsideTheObject) {
  auto inside = [](const CompactText& t) {
    const char* self = reinterpret_cast<const char*>(&t);
    return t.data() >= self && t.data() < self + sizeof t;
  };
  static_assert(sizeof(CompactText) == 8);
  CompactText seven("storage"), eight("exp_avg_");
  EXPECT_TRUE(inside(seven));
  EXPECT_FALSE(inside(eight));
  EXPECT_EQ(seven, "storage");
  EXPECT_EQ(eight, "exp_avg_");
  CompactText nul(std::string_view("\0\0", 2));
  EXPECT_TRUE(inside(nul));
  EXPECT_FALSE(nul.empty());
  EXPECT_EQ(nul.view(), std::string_view("\0\0", 2));
  eight = eight.view().substr(4);  // heap to inline, from its own bytes
  EXPECT_TRUE(inside(eight));
  EXPECT_EQ(eight, "avg_");
  seven = std::string(100, 'x');  // inline to heap
  EXPECT_FALSE(inside(seven));
  EXPECT_EQ(seven.size(), 100u);
  CompactText moved = std::move(eight);
  EXPECT_EQ(moved, "avg_");
  EXPECT_TRUE(inside(moved));
  moved = std::move(seven);
  EXPECT_EQ(moved.size(), 100u);
  std::swap(moved, eight);
  EXPECT_EQ(eight.size(), 100u);
}

// A class name set on 4 * 10^5 dicts is one static copy, not a heap block each.
TEST(CompactTextTest, CommonTextsShareOneStaticCopy) {
  CompactText a = CompactText::Common("collections.OrderedDict");
  CompactText b = CompactText::Common("collections.OrderedDict");
  EXPECT_EQ(a, "collections.OrderedDict");
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(a.data()[a.size()], '\0');
  CompactText copy = a;
  EXPECT_EQ(copy.data(), a.data()) << "copies keep referring to it";
  copy = CompactText("collections.defaultdict but longer");  // static to heap: nothing freed that was not allocated
  EXPECT_EQ(copy, "collections.defaultdict but longer");
  copy = b;  // heap to static
  EXPECT_EQ(copy.data(), a.data());
  copy = "short";  // static to inline
  EXPECT_EQ(copy, "short");
  CompactText other = CompactText::Common("not one of them");
  EXPECT_NE(other.data(), a.data());
  EXPECT_EQ(other, "not one of them");
  EXPECT_EQ(CompactText::Common("torch.Size"), "torch.Size");
  CompactText moved = std::move(b);
  EXPECT_EQ(moved.data(), a.data());
}

TEST(CompactListTest, BehavesAsAVector) {
  CompactList<uint32_t> l;
  EXPECT_TRUE(l.empty());
  for (uint32_t i = 0; i < 100; ++i) l.push_back(i);
  EXPECT_EQ(l.size(), 100u);
  EXPECT_EQ(l.back(), 99u);
  std::vector<uint32_t> as_vector = l;
  EXPECT_EQ(as_vector.size(), 100u);
  l.insert(l.begin(), 7u);
  EXPECT_EQ(l[0], 7u);
  EXPECT_EQ(l[1], 0u);
  EXPECT_EQ(l.size(), 101u);
  l.erase(l.begin(), l.begin() + 2);
  EXPECT_EQ(l[0], 1u);
  EXPECT_EQ(l.size(), 99u);
  l = {3, 4};
  EXPECT_EQ(l, (std::vector<uint32_t>{3, 4}));
  CompactList<uint32_t> copy = l;
  l.push_back(5);
  EXPECT_EQ(copy.size(), 2u);
  EXPECT_THROW((void)copy.at(2), std::out_of_range);
}

// The heap block's capacity is malloc's: a list grown, emptied and grown
// again, or shrunk and refilled, never writes past what it holds.
TEST(CompactListTest, HeapCapacityComesFromTheBlock) {
  CompactList<uint32_t> l = {1, 2, 3, 4, 5};
  EXPECT_GE(l.capacity(), 5u);
  for (int round = 0; round < 3; ++round) {
    l.clear();
    for (uint32_t i = 0; i < 1000; ++i) {
      l.push_back(i * 7);
      ASSERT_GE(l.capacity(), l.size());
    }
    for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(l[i], i * 7) << round;
  }
  l.erase(l.begin() + 2, l.end());
  l.resize(300);
  EXPECT_EQ(l[1], 7u);
  EXPECT_EQ(l[299], 0u);
  EXPECT_GE(l.capacity(), 300u);
}

// Up to 8 bytes of elements live in the list itself: two NodeIds, one Entry.
// A third element moves them to the heap; moves carry inline elements along.
TEST(CompactListTest, PairsLiveInsideTheList) {
  auto inside = [](const auto& l) {
    const char* self = reinterpret_cast<const char*>(&l);
    const char* d = reinterpret_cast<const char*>(l.data());
    return d >= self && d < self + sizeof l;
  };
  // 12 bytes for 4-byte elements, which Node holds two lists of; 8-byte
  // elements keep their alignment inline.
  static_assert(sizeof(CompactList<uint32_t>) == 12 && sizeof(CompactList<Entry>) == 12);
  static_assert(sizeof(CompactList<uint64_t>) == 16 && alignof(CompactList<uint64_t>) == 8);
  CompactList<uint32_t> pair = {16, 8};
  EXPECT_TRUE(inside(pair));
  EXPECT_EQ(pair, (std::vector<uint32_t>{16, 8}));
  EXPECT_EQ(pair.capacity(), 2u);
  CompactList<uint32_t> moved = std::move(pair);
  EXPECT_TRUE(inside(moved));
  EXPECT_EQ(moved, (std::vector<uint32_t>{16, 8}));
  EXPECT_TRUE(pair.empty());
  moved.push_back(1);
  EXPECT_FALSE(inside(moved));
  EXPECT_EQ(moved, (std::vector<uint32_t>{16, 8, 1}));
  moved.push_back(moved[0]);  // an element of the list itself, across a growth
  EXPECT_EQ(moved, (std::vector<uint32_t>{16, 8, 1, 16}));
  CompactList<uint32_t> copy = moved;
  EXPECT_EQ(copy, moved);
  copy = {5};
  EXPECT_EQ(copy, (std::vector<uint32_t>{5}));
  std::swap(copy, moved);
  EXPECT_EQ(copy.size(), 4u);
  EXPECT_EQ(moved, (std::vector<uint32_t>{5}));
  EXPECT_FALSE(inside(moved)) << "assignment keeps the heap block, as a vector keeps its capacity";

  CompactList<Entry> one;
  one.emplace_back(3u, 4u);
  EXPECT_TRUE(inside(one));
  one.emplace_back(5u, 6u);
  EXPECT_FALSE(inside(one));
  EXPECT_EQ(one[0], Entry(3, 4));
  EXPECT_EQ(one[1], Entry(5, 6));
}

}  // namespace
}  // namespace optstate
