#include "optstate/dcp_writer.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "optstate/checkpoint_writer.h"
#include "optstate/graph_builder.h"

namespace optstate {
namespace {

// Where one entry goes: its chunks (tensors) with their ranks, or one rank (bytes).
struct Placement {
  std::vector<DcpChunk> chunks;
  std::vector<int> chunk_rank;
  int rank = 0;  // bytes items and unsplit tensors
};

uint64_t RowBytes(const DcpOutEntry& e) {
  uint64_t n = GetDTypeInfo(e.dtype).element_size;
  for (size_t d = 1; d < e.size.size(); ++d) n *= static_cast<uint64_t>(e.size[d]);
  return n;
}

std::vector<Placement> Plan(const std::vector<DcpOutEntry>& entries, int world) {
  std::vector<Placement> plan(entries.size());
  std::vector<uint64_t> load(world, 0);
  // Split tensors first, so the rest can even out what they leave.
  for (size_t i = 0; i < entries.size(); ++i) {
    const DcpOutEntry& e = entries[i];
    if (!e.is_tensor || e.size.empty()) continue;
    for (int r = 0; r < world; ++r) {
      auto [begin, end] = ChunkRows(e.size[0], world, r);
      if (begin >= end && !(e.size[0] == 0 && r == 0)) continue;  // an empty tensor still gets one chunk
      DcpChunk c;
      c.offsets.assign(e.size.size(), 0);
      c.offsets[0] = begin;
      c.sizes = e.size;
      c.sizes[0] = end - begin;
      plan[i].chunks.push_back(std::move(c));
      plan[i].chunk_rank.push_back(r);
      load[r] += static_cast<uint64_t>(end - begin) * RowBytes(e);
    }
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const DcpOutEntry& e = entries[i];
    if (e.is_tensor && !e.size.empty()) continue;
    int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    plan[i].rank = r;
    load[r] += e.is_tensor ? GetDTypeInfo(e.dtype).element_size : 1;
    if (e.is_tensor) {
      plan[i].chunks.push_back(DcpChunk{});
      plan[i].chunk_rank.push_back(r);
    }
  }
  return plan;
}

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(dir + ": cannot open directory: " + std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return IoError(dir + ": fsync: " + std::strerror(errno));
  return Status();
}

// A temporary directory beside `dir`, removed unless Keep() renames it into place.
class StagingDirectory {
 public:
  static StatusOr<std::unique_ptr<StagingDirectory>> Create(const std::string& dir) {
    std::filesystem::path final_path(dir);
    std::error_code ec;
    if (std::filesystem::exists(final_path, ec)) {
      return InvalidArgumentError(dir + ": already exists; choose a new directory (nothing is overwritten)");
    }
    std::filesystem::path parent = final_path.parent_path().empty() ? "." : final_path.parent_path();
    std::string pattern = (parent / ("." + final_path.filename().string() + ".tmp-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return IoError(pattern + ": cannot create a temporary directory: " + std::strerror(errno));
    }
    return std::unique_ptr<StagingDirectory>(new StagingDirectory(pattern, dir, parent.string()));
  }
  ~StagingDirectory() {
    std::error_code ec;
    if (!kept_) std::filesystem::remove_all(temp_, ec);
  }
  const std::string& path() const { return temp_; }
  Status Keep(Durability durability) {
    if (durability == Durability::kSynced) OPTSTATE_RETURN_IF_ERROR(SyncDirectory(temp_));
    if (::rename(temp_.c_str(), final_.c_str()) != 0) {
      return IoError(final_ + ": cannot rename " + temp_ + " into place: " + std::strerror(errno));
    }
    kept_ = true;
    return durability == Durability::kSynced ? SyncDirectory(parent_) : Status();
  }

 private:
  StagingDirectory(std::string temp, std::string final_path, std::string parent)
      : temp_(std::move(temp)), final_(std::move(final_path)), parent_(std::move(parent)) {}
  std::string temp_, final_, parent_;
  bool kept_ = false;
};

}  // namespace

std::pair<int64_t, int64_t> ChunkRows(int64_t rows, int world_size, int rank) {
  int64_t per = (rows + world_size - 1) / world_size;  // torch.chunk's chunk size
  int64_t begin = std::min<int64_t>(rows, per * rank);
  return {begin, std::min<int64_t>(rows, begin + per)};
}

StatusOr<DcpWriteReport> WriteDcp(const std::vector<DcpOutEntry>& entries, const std::string& dir,
                                  const DcpWriteOptions& options) {
  if (options.world_size < 1 || options.world_size > 65536) {
    return InvalidArgumentError("world size " + std::to_string(options.world_size) + " is not in 1..65536");
  }
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<StagingDirectory> staging, StagingDirectory::Create(dir));
  std::vector<Placement> plan = Plan(entries, options.world_size);
  DcpWriteReport report;
  for (const DcpOutEntry& e : entries) {
    if (!e.is_tensor) continue;
    uint64_t n = GetDTypeInfo(e.dtype).element_size;
    for (int64_t d : e.size) n *= static_cast<uint64_t>(d);
    report.tensor_bytes += n;
  }
  std::vector<std::byte> buffer;
  uint64_t done = 0;
  for (int rank = 0; rank < options.world_size; ++rank) {
    std::string name = "__" + std::to_string(rank) + "_0.distcp";
    std::string where = dir + "/" + name;
    OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out,
                              AtomicFileWriter::Create(staging->path() + "/" + name, options.durability));
    // Bytes items first, then tensors, as DCP's writer orders a file.
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < entries.size(); ++i) {
        const DcpOutEntry& e = entries[i];
        if (e.is_tensor != (pass == 1)) continue;
        Placement& p = plan[i];
        if (!e.is_tensor) {
          if (p.rank != rank) continue;
          uint64_t start = out->position();
          OPTSTATE_RETURN_IF_ERROR_CTX(e.write_item(*out), where + ": '" + e.fqn + "'");
          p.chunks.clear();
          p.chunks.push_back(DcpChunk{{}, {}, DcpLocation{name, start, out->position() - start}});
          ++report.bytes_items;
          continue;
        }
        for (size_t c = 0; c < p.chunks.size(); ++c) {
          if (p.chunk_rank[c] != rank) continue;
          DcpChunk& chunk = p.chunks[c];
          int64_t begin = chunk.offsets.empty() ? 0 : chunk.offsets[0];
          int64_t end = chunk.offsets.empty() ? 1 : begin + chunk.sizes[0];
          uint64_t bytes = static_cast<uint64_t>(end - begin) * RowBytes(e);
          buffer.resize(bytes);
          OPTSTATE_RETURN_IF_ERROR_CTX(e.rows(begin, end, buffer.data()), where + ": '" + e.fqn + "'");
          report.largest_chunk_bytes = std::max(report.largest_chunk_bytes, bytes);
          Checkpoint item;
          GraphBuilder b(item);
          NodeId t = b.Tensor(e.dtype, chunk.sizes);
          uint64_t start = out->position();
          auto source = [&](size_t) -> StatusOr<ByteSpan> { return ByteSpan(buffer.data(), buffer.size()); };
          StatusOr<WriteReport> written = WriteEmbeddedCheckpoint(item, t, *out, source);
          if (!written.ok()) return std::move(written).status().WithContext(where + ": '" + e.fqn + "'");
          chunk.where = DcpLocation{name, start, out->position() - start};
          ++report.chunks;
          done += bytes;
          if (options.progress) options.progress(done, report.tensor_bytes);
        }
      }
    }
    report.file_bytes.push_back(out->position());
    OPTSTATE_RETURN_IF_ERROR_CTX(out->Commit(), where);
  }
  std::vector<DcpEntry> meta;
  for (size_t i = 0; i < entries.size(); ++i) {
    const DcpOutEntry& e = entries[i];
    DcpEntry m;
    m.fqn = e.fqn;
    m.path = e.path;
    m.is_tensor = e.is_tensor;
    m.dtype = e.dtype;
    m.size = e.size;
    if (e.is_tensor) {
      m.chunks = plan[i].chunks;
      ++report.tensors;
    } else {
      m.bytes_where = plan[i].chunks.at(0).where;
    }
    meta.push_back(std::move(m));
  }
  OPTSTATE_ASSIGN_OR_RETURN(std::string pickle, WriteDcpMetadata(meta));
  report.metadata_bytes = pickle.size();
  // .metadata last: a directory without it is not a checkpoint to DCP.
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> md,
                            AtomicFileWriter::Create(staging->path() + "/.metadata", options.durability));
  OPTSTATE_RETURN_IF_ERROR(md->Write(AsBytes(pickle)));
  OPTSTATE_RETURN_IF_ERROR(md->Commit());
  OPTSTATE_RETURN_IF_ERROR(staging->Keep(options.durability));
  return report;
}

}  // namespace optstate
