// `optstate validate` on a torch.save file or a DCP directory: what each holds
// is read, then checked by the rules that need only the checkpoint
// (validate_checkpoint.cc) and by those that need the parameter list
// (validate_params.cc). Rule ids and severities: validate_rules.cc.
#include "optstate/validate.h"

#include <unistd.h>

#include <optional>
#include <set>
#include <vector>

#include "check/finding_sink.h"
#include "check/validate_checkpoint.h"
#include "check/validate_params.h"
#include "optstate/dcp.h"
#include "optstate/file_io.h"
#include "optstate/params.h"
#include "optstate/torch_objects.h"
#include "torch/container.h"
#include "torch/security.h"
#include "zip/zip_archive.h"

namespace optstate {
namespace {

// Up to this many bytes, ReadSmallTensor reads with pread rather than through the mapping.
constexpr uint64_t kSmallTensorRead = 4096;

// The bytes of `t` when it is small and lies in one run of the file: kept
// from the header windows when its record is tiny (ZipArchive::tiny_records),
// else read with pread; nullopt otherwise (or when the read fails: the
// mapping is then read as before).
std::optional<std::vector<std::byte>> ReadSmallTensor(const CheckpointFile& file, const TensorRef& t) {
  if (t.storage < 0 || t.nbytes() == 0 || t.nbytes() > kSmallTensorRead) return std::nullopt;
  StatusOr<std::optional<ByteSpan>> in_place = TensorBytesInPlace(file.bytes(), file.checkpoint(), t);
  if (!in_place.ok() || !*in_place) return std::nullopt;
  const ByteSpan bytes = **in_place;
  const ZipArchive& zip = ZipDirectory(file.checkpoint().container);
  if (std::optional<ByteSpan> kept = zip.TinyRecordBytes(bytes.data(), bytes.size())) {
    return std::vector<std::byte>(kept->begin(), kept->end());
  }
  std::optional<FileRange> range = file.FileRangeOf(bytes);
  if (!range) return std::nullopt;
  std::vector<std::byte> out(bytes.size());
  ssize_t got = ::pread(range->fd, out.data(), out.size(), static_cast<off_t>(range->offset));
  if (got != static_cast<ssize_t>(out.size())) return std::nullopt;
  return out;
}

// The rules needing the parameter list are noted by CheckAgainstParams.
void NoteRules(const ValidateOptions& o, const Checkpoint& cp, ValidationReport& r) {
  const bool has_optimizer = !FindOptimizerStates(cp).empty();
  for (const RuleInfo& rule : ValidationRules()) {
    if (rule.needs_params || rule.needs_rank_set) continue;
    if (rule.needs_optimizer && !has_optimizer) {
      r.skipped.emplace_back(rule.id, "no optimizer state in this checkpoint");
    } else if (rule.needs_values && !o.scan_values) {
      r.skipped.emplace_back(rule.id, "--no-values");
    } else {
      r.checked.emplace_back(rule.id);
    }
  }
}

StatusOr<ValidationReport> ValidateUnreadable(const std::string& path, const ValidateOptions& o, Status error);

StatusOr<ValidationReport> ValidateDcpDirectory(const std::string& dir, const ValidateOptions& o) {
  ValidationReport r;
  r.input = dir;
  r.format = "dcp";
  DcpMetadataLimits limits;
  limits.pickle = o.read.pickle;
  limits.check_layout = false;  // reported as findings below, not refused
  StatusOr<std::unique_ptr<DcpCheckpoint>> opened = OpenDcpCheckpoint(dir, limits);
  // dcp.load unpickles .metadata first: a global it would run is the finding
  // it is, beside the read error, not only an unreadable directory.
  if (!opened.ok()) return ValidateUnreadable(dir, o, std::move(opened).status());
  std::unique_ptr<DcpCheckpoint> dcp = std::move(*opened);
  std::vector<ValidationFinding> layout;
  bool layout_ok = true;
  for (const DcpEntry& e : dcp->metadata().entries) {
    if (!e.is_tensor) continue;
    Status s = CheckDcpChunkLayout(e);
    if (!s.ok()) {
      layout_ok = false;
      layout.push_back({"dcp-chunk-layout", RuleSeverity::kError, ".metadata: " + e.fqn, std::string(s.message()), ""});
    }
  }
  OPTSTATE_ASSIGN_OR_RETURN(DcpGraph graph, BuildDcpGraph(*dcp, ConsolidateKeys::kFqn, o.read));
  NoteRules(o, graph.checkpoint, r);
  ReadOptions crc = o.read;
  crc.verify_crc = o.scan_values;
  TensorBytesReader read = [&](const TensorRef& t) { return ReadDcpTensor(*dcp, graph, t, crc); };
  TensorBytesReader none = [](const TensorRef&) -> StatusOr<std::vector<std::byte>> {
    return UnsupportedError("chunk layout is broken");
  };
  FindingSink sink(o, r);
  for (ValidationFinding& f : layout) sink.Add(f.rule, f.path, f.message);
  CheckCheckpointRules(graph.checkpoint, layout_ok ? read : none, nullptr, {}, sink);
  if (o.scan_values) {  // every item's records against their CRCs
    for (const DcpEntry& e : dcp->metadata().entries) {
      for (const DcpChunk& c : e.is_tensor ? e.chunks : std::vector<DcpChunk>{DcpChunk{{}, {}, e.bytes_where}}) {
        Status s = dcp->ParseItem(c.where, crc).status();
        if (!s.ok()) sink.Add("crc-mismatch", DcpLocationText(c.where) + " ('" + e.fqn + "')", std::string(s.message()));
        // Read through the mapping: at 320 k items of ~1 KB, the whole directory
        // stayed resident (320 MB) until released.
        dcp->ReleasePages(dcp->ItemBytes(c.where));  // every location fits its file (OpenDcpCheckpoint)
      }
    }
  }
  OPTSTATE_RETURN_IF_ERROR(CheckAgainstParams(graph.checkpoint, ByteSpan(), dir, sink));
  if (CancellationRequested()) return CancelledError(dir + ": validate cancelled");
  return r;
}

// A file optstate cannot read may still be one torch.load starts running: a
// raw pickle, a legacy stream without the magic number, a pickle that breaks
// after its payload. When what torch.load would run names globals, the report
// gives those findings beside the read error (format "unreadable"; exit 1 when
// one is an error to call, else still 2); with none the error stands alone.
StatusOr<ValidationReport> ValidateUnreadable(const std::string& path, const ValidateOptions& o, Status error) {
  std::optional<UnreadableScan> judged = ScanWhatTorchLoadWouldRunOf(path, error, o.read.pickle);
  if (!judged) return error;
  const UnreadableScan& scan = *judged;
  // Named even when nothing is an error to call (numpy reconstruction in a raw
  // pickle): torch.load resolves them before it fails. The exit stays 2 then.
  bool named = false;
  for (const Finding& f : scan.findings) named |= f.severity != Severity::kInfo;
  if (!named) return error;
  ValidationReport r;
  r.input = path;
  r.format = "unreadable";
  r.read_error = ValidationReport::ReadError{error.ToString(), scan.scanned, scan.stopped_at, scan.not_scanned};
  FindingSink sink(o, r);
  AddSecurityFindings(scan.findings, sink);
  for (const RuleInfo& rule : ValidationRules()) {
    if (rule.needs_rank_set) continue;
    if (JudgesPickles(rule.id)) {
      r.checked.emplace_back(rule.id);
    } else {
      r.skipped.emplace_back(rule.id, "the file could not be read as a checkpoint");
    }
  }
  return r;
}

// torch 2.6's torch.load(path) with its default weights_only=True, judged
// from what it would read: the opcodes of every pickle it unpickles and the
// globals they name (the security scan's findings), or a format it does not
// read at all. tests/oracle/check_corpus.py holds this against torch itself.
ValidationReport::TorchLoadPrediction PredictTorchLoad(const Checkpoint& cp) {
  ValidationReport::TorchLoadPrediction p;
  if (cp.container.format == ContainerFormat::kZstd) {
    p.reasons.push_back("zstd-compressed: torch.load reads it only once decompressed (zstd -d)");
  } else if (cp.container.format == ContainerFormat::kSafetensors) {
    p.reasons.push_back("a safetensors file: torch.load does not read it (safetensors.torch.load_file does)");
  }
  if (cp.container.format == ContainerFormat::kZip || cp.container.format == ContainerFormat::kLegacy) {
    std::vector<std::string> ops = OpcodesWeightsOnlyRefuses(cp.pickle_opcodes);
    if (!ops.empty()) {
      std::string list;
      for (const std::string& op : ops) list += (list.empty() ? "" : ", ") + op;
      p.reasons.push_back("pickle opcodes its unpickler does not take (" + list + "; pickle protocol " +
                          std::to_string(cp.pickle_protocol) + ", torch.save's default is 2)");
    }
    std::set<std::string> named;
    for (const Finding& f : cp.findings) {
      if (f.code == "torchscript-archive") p.reasons.push_back("a TorchScript archive (constants.pkl)");
      if (f.global.empty() || !named.insert(f.global).second) continue;
      if (f.code == "global-needs-import") {
        p.reasons.push_back("global " + f.global + " is allowed only once torch.distributed.tensor is imported");
      } else if (f.code == "dangerous-global" || f.code == "unknown-global-called" ||
                 f.code == "global-not-allowlisted" || f.code == "import-runs-code") {
        p.reasons.push_back("global " + f.global + " is not on its allowlist");
      }
    }
  }
  p.weights_only = p.reasons.empty() ? "accepts" : "refuses";
  return p;
}

}  // namespace

StatusOr<ValidationReport> Validate(const std::string& path, const ValidateOptions& o) {
  if (IsDcpDirectory(path)) return ValidateDcpDirectory(path, o);
  ReadOptions read = o.read;
  // Every record's data offset: for the CRC check, and so that each `step`
  // is read with pread (or taken from the header reads) rather than through
  // the mapping, under --no-values too. Read beside the pickle's parse, they
  // cost no time of their own (--no-values on 4 * 10^4 tensors of 16 KiB:
  // 0.40 -> 0.22 s).
  read.resolve_offsets = true;
  // The records those header reads bring in whole are swept as they come
  // (value_scan.h): the value pass then reads only the rest.
  SweptRecords swept;
  if (o.scan_values) read.record_bytes_read = [&swept](ByteSpan where, ByteSpan bytes) { swept.Sweep(where, bytes); };
  StatusOr<std::unique_ptr<CheckpointFile>> opened = OpenCheckpoint(path, read);
  if (!opened.ok()) return ValidateUnreadable(path, o, std::move(opened).status());
  swept.Seal();
  std::unique_ptr<CheckpointFile> file = std::move(*opened);
  const Checkpoint& cp = file->checkpoint();
  ValidationReport r;
  r.input = path;
  r.format = std::string(ContainerFormatName(cp.container.format));
  NoteRules(o, cp, r);
  // What the rules read through the mapping (anything ReadSmallTensor cannot
  // answer) is released in batches: a storage smaller than a page releases
  // nothing by itself, and reading one in four records of 10^5 parameters
  // touched the whole file.
  ReleaseInBatches<CheckpointFile> read_pages(*file);
  TensorBytesReader reader = [&](const TensorRef& t) -> StatusOr<std::vector<std::byte>> {
    // A small tensor in one run is read with pread: the first touch of a
    // mapped page per `step` costs more than the read, and leaves the page.
    if (std::optional<std::vector<std::byte>> small = ReadSmallTensor(*file, t)) return std::move(*small);
    OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, ReadTensorBytes(file->bytes(), cp, t));
    if (t.storage >= 0) {
      StatusOr<ByteSpan> storage = StorageBytes(file->bytes(), cp, cp.storages[t.storage]);
      if (storage.ok()) {
        file->ReleasePages(*storage);
        read_pages.Add(*storage);
      }
    }
    return bytes;
  };
  std::vector<const ZipEntry*> records;  // stored whole in the file: their CRCs are checked
  if (o.scan_values) {
    for (const ZipEntry& e : ZipDirectory(cp.container).entries) {
      if (e.method == 0 && e.data_offset_known && e.data_offset <= file->bytes().size() &&
          e.size <= file->bytes().size() - e.data_offset) {
        records.push_back(&e);
      }
    }
  }
  FindingSink sink(o, r);
  CheckCheckpointRules(cp, reader, file.get(), records, sink, &swept);
  OPTSTATE_RETURN_IF_ERROR(CheckAgainstParams(cp, file->bytes(), path, sink));
  r.torch_load = PredictTorchLoad(cp);
  if (CancellationRequested()) return CancelledError(path + ": validate cancelled");
  return r;
}

}  // namespace optstate
