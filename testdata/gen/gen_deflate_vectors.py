"""Raw DEFLATE streams (RFC 1951, as zip method 8 stores them) of a real pickle, made by zlib,
for lib/zip/inflate.cc's tests: every block type zlib writes.

Usage: python3 testdata/gen/gen_deflate_vectors.py OUTDIR   (stdlib only)
Writes OUTDIR/p4.pkl.deflate-<kind> for kind in
  stored   level 0: stored blocks
  fixed    Z_FIXED strategy: fixed Huffman codes
  dynamic  level 9: dynamic Huffman codes
  multi    a stream flushed every 300 bytes (several blocks, the last one final)
each inflating to testdata/pickles/p4.pkl exactly.
"""
import os
import sys
import zlib


def deflate(data, level=9, strategy=zlib.Z_DEFAULT_STRATEGY, flush_every=None):
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 9, strategy)
    out = b""
    if flush_every:
        for i in range(0, len(data), flush_every):
            out += c.compress(data[i:i + flush_every]) + c.flush(zlib.Z_FULL_FLUSH)
    else:
        out += c.compress(data)
    return out + c.flush()


def main():
    out = sys.argv[1]
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pickles", "p4.pkl")
    data = open(src, "rb").read()
    cases = {
        "stored": deflate(data, level=0),
        "fixed": deflate(data, strategy=zlib.Z_FIXED),
        "dynamic": deflate(data),
        "multi": deflate(data, flush_every=300),
    }
    for kind, stream in cases.items():
        assert zlib.decompress(stream, -15) == data
        with open(os.path.join(out, "p4.pkl.deflate-" + kind), "wb") as f:
            f.write(stream)
        print(kind, len(stream))


if __name__ == "__main__":
    main()
