"""Tar records as Python's tarfile parses them, for torch.load's pre-0.4 path (pure bytes, no torch).

torch.load tries tarfile before the legacy pickle stream, and tarfile needs only a header whose
checksum is right: no ustar magic (V7 headers), GNU long-name records, the last member of a name
winning. The hostile fixtures and the oracle's mutations build their tars from these.
"""
import struct


def checksummed(h):
    h[148:156] = b" " * 8
    h[148:156] = f"{sum(h):06o}\0 ".encode()
    return bytes(h)


def tar_header(name, size, typeflag=b"0", ustar=True):
    """One 512-byte tar header as tarfile parses it: only the checksum must be right."""
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = f"{size:011o}\0".encode()
    h[136:148] = b"00000000000\0"
    h[156:157] = typeflag
    if ustar:
        h[257:265] = b"ustar\x0000"
    return checksummed(h)


def tar_member(name, data, **kw):
    return tar_header(name, len(data), **kw) + data + b"\0" * (-len(data) % 512)


def tar_of(members, ustar=True):
    """A whole tar of (name, data) members, with its two zero blocks."""
    return b"".join(tar_member(n.encode(), d, ustar=ustar) for n, d in members) + b"\0" * 1024


def tar_then_legacy(members, legacy):
    """A legacy-format file whose first bytes are also a valid tar of `members`: its magic-number
    pickle starts with BINBYTES covering the whole tar, then POP, then the magic number (the
    legacy file's first pickle without its PROTO). torch.load tries tarfile first."""
    magic_len = legacy.index(b".") + 1  # PROTO 2, LONG1 of 10 bytes (no 0x2e among them), STOP
    assert legacy[:4] == b"\x80\x02\x8a\x0a" and magic_len == 15
    body = b"".join(tar_member(n.encode(), d) for n, d in members) + b"\0" * 1024
    first = bytearray(tar_header(b"x", 0))
    n = len(first) + len(body) - 7  # BINBYTES' bytes: everything of the tar after its own 7 opcode bytes
    first[0:7] = b"\x80\x02B" + struct.pack("<I", n)
    first[7:100] = b"\0" * 93  # the member's name ends at the first NUL
    return checksummed(first) + body + b"0" + legacy[2:]  # POP, then the legacy file without PROTO
