#include "torch/shard_layout.h"

#include <algorithm>
#include <map>

#include "optstate/torch_objects.h"

namespace optstate {
namespace {

// A small non-negative decimal, or -1.
int64_t SmallNumber(const std::string& s) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(s);
}

std::string Where(const std::vector<ShardView>& views, size_t r) {
  return views[r].where.empty() ? "rank " + std::to_string(r) : views[r].where;
}

// torch.chunk's split of n elements into `parts`: chunk i's offset and length.
void Chunk(int64_t n, int64_t parts, int64_t i, int64_t& offset, int64_t& length) {
  int64_t full = parts > 0 ? (n + parts - 1) / parts : n;
  offset = std::min(i * full, n);
  length = std::min(full, n - offset);
}

// Mesh dims in the order their splits were applied to each tensor dim.
struct SplitOrder {
  std::vector<std::vector<size_t>> by_dim;
};

StatusOr<SplitOrder> OrderSplits(size_t ndim, const std::vector<Placement>& placements,
                                 const std::vector<int64_t>& mesh, const std::vector<std::string>& texts) {
  SplitOrder order;
  order.by_dim.resize(ndim);
  std::vector<std::vector<size_t>> strided(ndim);
  for (size_t i = 0; i < placements.size(); ++i) {
    const Placement& p = placements[i];
    if (p.kind == Placement::Kind::kReplicate) continue;
    if (p.kind == Placement::Kind::kPartial || p.kind == Placement::Kind::kUnknown) {
      return UnsupportedError("placement " + texts[i] + " on mesh dim " + std::to_string(i) +
                              " cannot be made whole from the shards alone");
    }
    if (p.dim < 0 || static_cast<size_t>(p.dim) >= ndim) {
      return InvalidArgumentError("placement " + texts[i] + " names a dim the " + std::to_string(ndim) +
                                  "-D tensor does not have");
    }
    (p.kind == Placement::Kind::kShard ? order.by_dim : strided)[static_cast<size_t>(p.dim)].push_back(i);
  }
  for (size_t d = 0; d < ndim; ++d) {
    for (size_t i : strided[d]) {
      // sf counts the shards the later mesh dims make of this tensor dim.
      int64_t later = 1;
      for (size_t j : order.by_dim[d]) later *= j > i ? mesh[j] : 1;
      if (later != placements[i].split_factor) {
        return UnsupportedError("placement " + texts[i] + " on mesh dim " + std::to_string(i) + ": split factor " +
                                std::to_string(placements[i].split_factor) + " where the later mesh dims make " +
                                std::to_string(later) + " shards of dim " + std::to_string(d));
      }
    }
    order.by_dim[d].insert(order.by_dim[d].end(), strided[d].begin(), strided[d].end());
  }
  return order;
}

ShardBox BoxAt(const std::vector<int64_t>& global, const SplitOrder& order, const std::vector<int64_t>& mesh,
               const std::vector<int64_t>& coordinate) {
  ShardBox box{std::vector<int64_t>(global.size(), 0), global};
  for (size_t d = 0; d < global.size(); ++d) {
    for (size_t i : order.by_dim[d]) {
      int64_t offset = 0, length = 0;
      Chunk(box.sizes[d], mesh[i], coordinate[i], offset, length);
      box.offsets[d] += offset;
      box.sizes[d] = length;
    }
  }
  return box;
}

// Position `index` of a row-major mesh.
std::vector<int64_t> Unravel(size_t index, const std::vector<int64_t>& mesh) {
  std::vector<int64_t> c(mesh.size(), 0);
  for (size_t i = mesh.size(); i-- > 0;) {
    c[i] = static_cast<int64_t>(index) % mesh[i];
    index /= static_cast<size_t>(mesh[i]);
  }
  return c;
}

// The owners in offset order (row-major), and whether their blocks are whole
// rows, whose bytes one after the other are the whole tensor's.
ShardTiling Owned(const std::vector<int64_t>& global, const std::map<std::vector<int64_t>, size_t>& owner_of,
                  ShardTiling tiling) {
  for (auto& [offsets, r] : owner_of) tiling.owners.push_back(r);
  tiling.row_slabs = true;
  for (size_t r : tiling.owners) {
    const ShardBox& b = tiling.boxes[r];
    for (size_t d = 1; d < global.size(); ++d) tiling.row_slabs &= b.offsets[d] == 0 && b.sizes[d] == global[d];
  }
  return tiling;
}

}  // namespace

std::string PlacementsText(const std::vector<std::string>& placements) {
  std::string out;
  for (const std::string& p : placements) out += (out.empty() ? "" : ", ") + p;
  return out;
}

Placement ParsePlacement(const std::string& text) {
  Placement p;
  if (text == "Replicate()") {
    p.kind = Placement::Kind::kReplicate;
  } else if (text.rfind("Partial(", 0) == 0) {
    p.kind = Placement::Kind::kPartial;
  } else if (text.rfind("Shard(dim=", 0) == 0 && text.back() == ')') {
    p.dim = SmallNumber(text.substr(10, text.size() - 11));
    if (p.dim >= 0) p.kind = Placement::Kind::kShard;
  } else if (text.rfind("_StridedShard(dim=", 0) == 0 && text.back() == ')') {
    std::string inner = text.substr(18, text.size() - 19);  // "0, sf=2"
    size_t comma = inner.find(", sf=");
    if (comma != std::string::npos) {
      p.dim = SmallNumber(inner.substr(0, comma));
      p.split_factor = SmallNumber(inner.substr(comma + 5));
      if (p.dim >= 0 && p.split_factor > 0) p.kind = Placement::Kind::kStridedShard;
    }
  }
  return p;
}

StatusOr<ShardTiling> TileShards(const std::vector<int64_t>& global, const std::vector<std::string>& texts,
                                 const std::vector<int64_t>& mesh, const std::vector<ShardView>& views) {
  if (texts.size() != mesh.size()) {
    return InvalidArgumentError(std::to_string(texts.size()) + (texts.size() == 1 ? " placement" : " placements") +
                                " for a mesh of shape " + ShapeText(mesh));
  }
  uint64_t positions = 1;
  for (int64_t m : mesh) {
    if (m <= 0 || m > (1 << 20)) return InvalidArgumentError("mesh of shape " + ShapeText(mesh));
    positions *= static_cast<uint64_t>(m);
    if (positions > (1u << 24)) return InvalidArgumentError("mesh of shape " + ShapeText(mesh) + " is too large");
  }
  std::vector<Placement> placements;
  for (const std::string& t : texts) placements.push_back(ParsePlacement(t));
  OPTSTATE_ASSIGN_OR_RETURN(SplitOrder order, OrderSplits(global.size(), placements, mesh, texts));

  ShardTiling tiling;
  std::map<std::vector<int64_t>, size_t> holder;  // coordinate -> first view holding it
  std::map<std::vector<int64_t>, size_t> owner_of;  // block offsets -> owning view
  for (size_t r = 0; r < views.size(); ++r) {
    std::vector<int64_t> c = views[r].mesh_coordinate;
    if (c.empty()) {
      if (positions != views.size()) {
        return InvalidArgumentError(Where(views, r) + ": the file does not record its mesh coordinate, and the mesh " +
                                    ShapeText(mesh) + " has " + std::to_string(positions) + " positions for " +
                                    std::to_string(views.size()) + " files");
      }
      c = Unravel(r, mesh);
    }
    if (c.size() != mesh.size()) {
      return InvalidArgumentError(Where(views, r) + ": mesh coordinate " + ShapeText(c) + " on a mesh of shape " +
                                  ShapeText(mesh));
    }
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i] < 0 || c[i] >= mesh[i]) {
        return InvalidArgumentError(Where(views, r) + ": mesh coordinate " + ShapeText(c) + " is outside the mesh " +
                                    ShapeText(mesh));
      }
    }
    auto [seen, fresh] = holder.emplace(c, r);
    if (!fresh && positions == views.size()) {
      return InvalidArgumentError(Where(views, r) + " and " + Where(views, seen->second) + " both hold mesh coordinate " +
                                  ShapeText(c) + ": a file is repeated or from another save");
    }
    ShardBox box = BoxAt(global, order, mesh, c);
    if (box.sizes != views[r].local_sizes) {
      return InvalidArgumentError(Where(views, r) + ": local shard " + ShapeText(views[r].local_sizes) + " where " +
                                  ShapeText(global) + " placed so at mesh coordinate " + ShapeText(c) + " of " +
                                  ShapeText(mesh) + " is " + ShapeText(box.sizes));
    }
    if (!owner_of.emplace(box.offsets, r).second) ++tiling.replicas;
    tiling.boxes.push_back(std::move(box));
  }
  if (holder.size() != positions) {
    for (size_t i = 0; i < positions; ++i) {
      std::vector<int64_t> c = Unravel(i, mesh);
      if (!holder.count(c)) {
        return InvalidArgumentError("no file holds mesh coordinate " + ShapeText(c) + " of " + ShapeText(mesh) +
                                    ": a rank's file is missing");
      }
    }
  }
  return Owned(global, owner_of, std::move(tiling));
}

StatusOr<ShardTiling> TileExplicitBlocks(const std::vector<int64_t>& global, const std::vector<ShardView>& views) {
  ShardTiling tiling;
  std::map<std::vector<int64_t>, size_t> owner_of;  // block offsets -> first view holding that block
  std::map<std::vector<int64_t>, size_t> saved_by;  // the rank each file says saved it -> that view
  unsigned __int128 covered = 0;
  for (size_t r = 0; r < views.size(); ++r) {
    if (!views[r].mesh_coordinate.empty()) {
      auto [seen, fresh] = saved_by.emplace(views[r].mesh_coordinate, r);
      if (!fresh) {
        return InvalidArgumentError(Where(views, r) + " and " + Where(views, seen->second) + " were both saved by rank " +
                                    std::to_string(views[r].mesh_coordinate[0]) + ": a file is repeated or from another save");
      }
    }
    ShardBox box;
    if (!views[r].block_offsets) {  // no block here: an empty box, owned by nobody
      box.offsets.assign(global.size(), 0);
      box.sizes.assign(global.size(), 0);
      tiling.boxes.push_back(std::move(box));
      continue;
    }
    box.offsets = *views[r].block_offsets;
    box.sizes = views[r].local_sizes;
    if (box.offsets.size() != global.size() || box.sizes.size() != global.size()) {
      return InvalidArgumentError(Where(views, r) + ": a block at " + ShapeText(box.offsets) + " of size " +
                                  ShapeText(box.sizes) + " in a tensor of shape " + ShapeText(global));
    }
    for (size_t d = 0; d < global.size(); ++d) {
      if (box.offsets[d] < 0 || box.sizes[d] < 0 || box.offsets[d] > global[d] - box.sizes[d]) {
        return InvalidArgumentError(Where(views, r) + ": the block at " + ShapeText(box.offsets) + " of size " +
                                    ShapeText(box.sizes) + " reaches outside the whole " + ShapeText(global));
      }
    }
    auto [it, fresh] = owner_of.emplace(box.offsets, r);
    if (!fresh) {
      if (tiling.boxes[it->second].sizes != box.sizes) {
        return InvalidArgumentError(Where(views, r) + " and " + Where(views, it->second) + ": blocks at " +
                                    ShapeText(box.offsets) + " of different sizes");
      }
      ++tiling.replicas;
    } else {
      for (const auto& [offsets, other] : owner_of) {  // ranks are few: every pair is compared
        if (other == r) continue;
        const ShardBox& o = tiling.boxes[other];
        bool meet = true;
        for (size_t d = 0; d < global.size() && meet; ++d) {
          meet = box.offsets[d] < o.offsets[d] + o.sizes[d] && o.offsets[d] < box.offsets[d] + box.sizes[d];
        }
        if (meet) {
          return InvalidArgumentError(Where(views, r) + ": its block at " + ShapeText(box.offsets) + " overlaps " +
                                      Where(views, other) + "'s at " + ShapeText(o.offsets));
        }
      }
      covered += ShapeNumel(box.sizes);
    }
    tiling.boxes.push_back(std::move(box));
  }
  if (covered != ShapeNumel(global)) {
    return InvalidArgumentError("the blocks of " + std::to_string(views.size()) + " files cover " +
                                std::to_string(static_cast<uint64_t>(covered)) + " of the " +
                                std::to_string(ShapeNumel(global)) + " elements of " + ShapeText(global) +
                                ": a rank's file is missing");
  }
  return Owned(global, owner_of, std::move(tiling));
}

}  // namespace optstate
