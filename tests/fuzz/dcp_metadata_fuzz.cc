// DCP's .metadata: parsed with the allowlist, layout-checked, and when it is
// readable written back and read again, which must give the same entries.
#include "fuzz_target.h"
#include "optstate/dcp_metadata.h"

OPTSTATE_FUZZ_TARGET(dcp_metadata) {
  using namespace optstate;
  DcpMetadataLimits limits;
  limits.pickle.max_nodes = 1u << 20;
  StatusOr<DcpMetadata> m = ParseDcpMetadata(fuzz::Bytes(data, size), limits);
  if (!m.ok()) return 0;
  for (const DcpEntry& e : m->entries) {
    if (e.is_tensor) (void)CheckDcpChunkLayout(e);
  }
  StatusOr<std::string> written = WriteDcpMetadata(m->entries);
  if (!written.ok()) return 0;
  StatusOr<DcpMetadata> again = ParseDcpMetadata(
      ByteSpan(reinterpret_cast<const std::byte*>(written->data()), written->size()), limits);
  if (!again.ok()) fuzz::FuzzCheckFailed("written .metadata unreadable: " + again.status().ToString());
  if (again->entries.size() != m->entries.size()) fuzz::FuzzCheckFailed("entry count changed in the round trip");
  for (size_t i = 0; i < m->entries.size(); ++i) {
    const DcpEntry &a = m->entries[i], &b = again->entries[i];
    if (a.fqn != b.fqn || a.is_tensor != b.is_tensor || a.size != b.size || a.dtype != b.dtype ||
        a.chunks.size() != b.chunks.size()) {
      fuzz::FuzzCheckFailed("entry '" + a.fqn + "' changed in the round trip");
    }
  }
  return 0;
}
