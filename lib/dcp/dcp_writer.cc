#include "optstate/dcp.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>

#include "io/job_steps.h"
#include "io/staging_directory.h"
#include "optstate/checkpoint_writer.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

// Where one entry goes: its chunks and their ranks (tensors), or one rank (bytes
// items, kept as a single chunk without a box so locations are stored alike).
struct Placement {
  std::vector<DcpChunk> chunks;
  std::vector<int> chunk_rank;
};

uint64_t ChunkBytes(const DcpOutEntry& e, const DcpChunk& c) {
  return e.size.empty() ? e.RowBytes() : static_cast<uint64_t>(c.sizes[0]) * e.RowBytes();
}

// The same plan in every process: it depends only on the entries and the world size.
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
      load[r] += ChunkBytes(e, c);
      plan[i].chunks.push_back(std::move(c));
      plan[i].chunk_rank.push_back(r);
    }
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const DcpOutEntry& e = entries[i];
    if (e.is_tensor && !e.size.empty()) continue;
    int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += e.is_tensor ? e.RowBytes() : 1;
    plan[i].chunks.push_back(DcpChunk{});
    plan[i].chunk_rank.push_back(r);
  }
  return plan;
}

std::string FileName(int rank) { return "__" + std::to_string(rank) + "_0.distcp"; }

// For a process other than rank 0 whose 'done' exchange failed: whether rank 0
// committed all the same. It did if `dir` now holds .metadata and, at their
// final names, the very files this process wrote (`wrote`, by rank in `mine`):
// `dir` did not exist when the job started (StagingDirectory::Create refuses
// one that does), and only rank 0's rename of the staging directory puts this
// process's files there. Returns the size of .metadata when it did.
std::optional<uint64_t> CommittedWithOurParts(const std::string& dir, const std::vector<int>& mine,
                                              const std::vector<std::optional<FileIdentity>>& wrote) {
  std::optional<FileIdentity> metadata = IdentityOf(dir + "/.metadata");
  if (!metadata) return std::nullopt;
  for (size_t i = 0; i < mine.size(); ++i) {
    std::optional<FileIdentity> now = IdentityOf(dir + "/" + FileName(mine[i]));
    if (!wrote[i] || !now || !now->SameFileAs(*wrote[i])) return std::nullopt;
  }
  return metadata->size;
}

// Writes one rank's file into `staging`: bytes items first, then tensors, as
// DCP's writer orders a file. Fills the locations of what it wrote.
Status WriteRankFile(const std::vector<DcpOutEntry>& entries, std::vector<Placement>& plan, int rank,
                     const std::string& staging, const std::string& dir, const DcpWriteOptions& options,
                     DcpWriteReport& report, std::vector<std::byte>& buffer) {
  const std::string name = FileName(rank), where = dir + "/" + name;
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out,
                            AtomicFileWriter::Create(staging + "/" + name, options.durability));
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < entries.size(); ++i) {
      const DcpOutEntry& e = entries[i];
      if (e.is_tensor != (pass == 1)) continue;
      Placement& p = plan[i];
      for (size_t c = 0; c < p.chunks.size(); ++c) {
        if (p.chunk_rank[c] != rank) continue;
        DcpChunk& chunk = p.chunks[c];
        uint64_t start = out->position();
        if (!e.is_tensor) {
          OPTSTATE_RETURN_IF_ERROR_CTX(e.write_item(*out), where + ": '" + e.fqn + "'");
          chunk.where = DcpLocation{name, start, out->position() - start};
          ++report.bytes_items;
          continue;
        }
        int64_t begin = chunk.offsets.empty() ? 0 : chunk.offsets[0];
        int64_t end = chunk.offsets.empty() ? 1 : begin + chunk.sizes[0];
        uint64_t bytes = ChunkBytes(e, chunk);
        std::vector<RecordPiece> pieces;
        if (e.pieces) {
          StatusOr<std::vector<RecordPiece>> got = e.pieces(begin, end);
          if (!got.ok()) return std::move(got).status().WithContext(where + ": '" + e.fqn + "'");
          pieces = std::move(*got);
        }
        if (pieces.empty()) {  // through memory
          buffer.resize(bytes);
          OPTSTATE_RETURN_IF_ERROR_CTX(e.rows(begin, end, buffer.data()), where + ": '" + e.fqn + "'");
          report.largest_chunk_bytes = std::max<uint64_t>(report.largest_chunk_bytes, bytes);
          pieces.push_back(RecordPiece{ByteSpan(buffer.data(), buffer.size()), std::nullopt, std::nullopt});
        }
        Checkpoint item;
        GraphBuilder b(item);
        NodeId t = b.Tensor(e.dtype, chunk.sizes);
        auto source = [&](size_t) -> StatusOr<std::vector<RecordPiece>> { return pieces; };
        StatusOr<WriteReport> written = WriteEmbeddedCheckpointFromPieces(item, t, *out, source, e.release);
        if (!written.ok()) return std::move(written).status().WithContext(where + ": '" + e.fqn + "'");
        chunk.where = DcpLocation{name, start, out->position() - start};
        ++report.chunks;
        report.written_tensor_bytes += bytes;
        if (options.progress) options.progress(report.written_tensor_bytes, report.tensor_bytes);
      }
    }
  }
  report.file_bytes[rank] = out->position();
  return out->Commit().WithContext(where);
}

// What one process wrote, for the others: "F rank bytes", "L entry chunk
// offset length" per item, "S chunks bytes_items largest"; or "!" and an error.
std::string Encode(const std::vector<Placement>& plan, const DcpWriteReport& r, const std::vector<int>& ranks) {
  std::ostringstream s;
  for (int rank : ranks) s << "F " << rank << " " << r.file_bytes[rank] << "\n";
  for (size_t i = 0; i < plan.size(); ++i) {
    for (size_t c = 0; c < plan[i].chunks.size(); ++c) {
      if (std::find(ranks.begin(), ranks.end(), plan[i].chunk_rank[c]) == ranks.end()) continue;
      const DcpLocation& w = plan[i].chunks[c].where;
      s << "L " << i << " " << c << " " << w.offset << " " << w.length << "\n";
    }
  }
  s << "S " << r.chunks << " " << r.bytes_items << " " << r.largest_chunk_bytes << "\n";
  return s.str();
}

Status Decode(const std::string& text, std::vector<Placement>& plan, DcpWriteReport& r) {
  std::istringstream in(text);
  std::string tag;
  while (in >> tag) {
    if (tag == "F") {
      size_t rank = 0;
      uint64_t bytes = 0;
      in >> rank >> bytes;
      if (!in || rank >= r.file_bytes.size()) return InternalError("bad file line from another process");
      r.file_bytes[rank] = bytes;
    } else if (tag == "L") {
      size_t i = 0, c = 0;
      uint64_t offset = 0, length = 0;
      in >> i >> c >> offset >> length;
      if (!in || i >= plan.size() || c >= plan[i].chunks.size()) return InternalError("bad item line from another process");
      plan[i].chunks[c].where = DcpLocation{FileName(plan[i].chunk_rank[c]), offset, length};
    } else if (tag == "S") {
      size_t chunks = 0, items = 0;
      uint64_t largest = 0;
      in >> chunks >> items >> largest;
      r.chunks += chunks;
      r.bytes_items += items;
      r.largest_chunk_bytes = std::max(r.largest_chunk_bytes, largest);
    } else {
      return InternalError("unexpected '" + tag + "' from another process");
    }
  }
  return Status();
}

// Takes the plan's chunks (the last use of the plan): a copy was 47 MB at
// 250 k chunks, beside the plan itself.
std::vector<DcpEntry> MetadataEntries(const std::vector<DcpOutEntry>& entries, std::vector<Placement>&& plan) {
  std::vector<DcpEntry> meta;
  meta.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    DcpEntry m = entries[i];  // key, path, kind, dtype, size
    m.chunks.clear();
    if (m.is_tensor) {
      m.chunks = std::move(plan[i].chunks);
    } else {
      m.bytes_where = plan[i].chunks.at(0).where;
    }
    meta.push_back(std::move(m));
  }
  return meta;
}

}  // namespace

Status AgreeToStart(Coordinator& coordinator, const Status& mine) {
  return GatherStep(coordinator, "ready", mine, "").status();
}

std::pair<int64_t, int64_t> ChunkRows(int64_t rows, int world_size, int rank) {
  int64_t per = (rows + world_size - 1) / world_size;  // torch.chunk's chunk size
  int64_t begin = std::min<int64_t>(rows, per * rank);
  return {begin, std::min<int64_t>(rows, begin + per)};
}

StatusOr<DcpWriteReport> WriteDcp(const std::vector<DcpOutEntry>& entries, const std::string& dir,
                                  const DcpWriteOptions& options, Coordinator* coordinator) {
  if (options.world_size < 1 || options.world_size > 65536) {
    return InvalidArgumentError("world size " + std::to_string(options.world_size) + " is not in 1..65536");
  }
  SoloCoordinator solo;
  Coordinator& co = coordinator ? *coordinator : solo;
  // Rank 0 makes the staging directory; everybody learns whether it could.
  std::unique_ptr<StagingDirectory> staging;
  Status made;
  if (co.rank() == 0) {
    auto created = StagingDirectory::Create(dir, co.size() > 1);
    if (created.ok()) staging = std::move(*created); else made = created.status();
  }
  OPTSTATE_RETURN_IF_ERROR(GatherStep(co, "start", made, "").status());
  const std::string staging_path = staging ? staging->path() : StagingDirectory::SharedPath(dir);

  std::vector<Placement> plan = Plan(entries, options.world_size);
  DcpWriteReport report;
  report.file_bytes.assign(options.world_size, 0);
  std::vector<int> mine;
  for (int rank = co.rank(); rank < options.world_size; rank += co.size()) mine.push_back(rank);
  for (size_t i = 0; i < entries.size(); ++i) {
    for (size_t c = 0; c < plan[i].chunks.size(); ++c) {
      if (entries[i].is_tensor && plan[i].chunk_rank[c] % co.size() == co.rank()) {
        report.tensor_bytes += ChunkBytes(entries[i], plan[i].chunks[c]);
      }
    }
  }
  Status wrote;
  std::vector<std::byte> buffer;
  for (int rank : mine) {
    wrote = WriteRankFile(entries, plan, rank, staging_path, dir, options, report, buffer);
    if (!wrote.ok()) break;
  }
  // Taken before saying so: once every process has, rank 0 may rename the staging directory.
  std::vector<std::optional<FileIdentity>> wrote_files;
  if (co.rank() != 0) {
    for (int rank : mine) wrote_files.push_back(IdentityOf(staging_path + "/" + FileName(rank)));
  }
  OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::string> written, GatherStep(co, "written", wrote, Encode(plan, report, mine)));
  DcpWriteReport all;
  all.file_bytes.assign(options.world_size, 0);
  for (const std::string& w : written) OPTSTATE_RETURN_IF_ERROR(Decode(w, plan, all));
  all.tensors = static_cast<size_t>(std::count_if(entries.begin(), entries.end(), [](const DcpOutEntry& e) { return e.is_tensor; }));
  all.tensor_bytes = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    for (const DcpChunk& c : plan[i].chunks) all.tensor_bytes += entries[i].is_tensor ? ChunkBytes(entries[i], c) : 0;
  }
  all.written_tensor_bytes = report.written_tensor_bytes;
  if (staging) all.leftovers = StagingDirectory::Leftovers(dir, staging->path());
  // .metadata last, by rank 0 alone: a directory without it is not a checkpoint to DCP.
  Status done;
  if (co.rank() == 0) {
    done = [&]() -> Status {
      OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> md,
                                AtomicFileWriter::Create(staging_path + "/.metadata", options.durability));
      OPTSTATE_ASSIGN_OR_RETURN(all.metadata_bytes,
                                WriteDcpMetadata(MetadataEntries(entries, std::move(plan)),
                                                 [&md](std::string_view piece) { return md->Write(AsBytes(piece)); }));
      OPTSTATE_RETURN_IF_ERROR(md->Commit());
      return staging->Keep(options.durability);
    }();
  }
  auto finished = GatherStep(co, "done", done, std::to_string(all.metadata_bytes));
  if (!finished.ok()) {
    // Every part was written and rank 0 has committed the output: a process
    // lost now does not make it any less complete.
    const std::string why = WhyStepFailed(co, finished.status());
    if (co.rank() == 0 && done.ok()) {
      all.unconfirmed = why;
      return all;
    }
    // Rank 0 may have committed and been lost before it could say so.
    if (co.rank() != 0) {
      if (std::optional<uint64_t> metadata = CommittedWithOurParts(dir, mine, wrote_files)) {
        all.metadata_bytes = *metadata;
        all.unconfirmed = CommitUnconfirmed(why, dir + " holds .metadata and this process's files");
        return all;
      }
    }
    return finished.status();
  }
  OPTSTATE_ASSIGN_OR_RETURN(all.metadata_bytes, SizeFromProcessZero(*finished, dir + "/.metadata"));
  return all;
}

}  // namespace optstate
