#!/usr/bin/python3
"""How fast the kernel copies a file range (copy_file_range) by where the copy
lands: at the same offset within 2 MiB as the source, within 1 MiB, 256 KiB,
64 KiB, 16 KiB, 4 KiB. Why optstate's zip writer starts a record it copies
whole at its source's offset within 64 KiB (lib/zip/zip_writer.cc).

Usage: bench/copy_phase_bench.py FILE [ROUNDS]
  FILE: at least 1.1 GiB, in the page cache (cat FILE > /dev/null first); the
  copies go to FILE.copy-bench beside it (removed after each). Prints the
  median seconds per GiB of each case, the rounds alternating between cases.
"""
import os
import sys
import time

M = 1 << 20
SIZE = 1 << 30


def copy_once(src, dst, source_at, dest_at):
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.pwrite(fo, b"x" * dest_at, 0)
        began = time.perf_counter()
        done = 0
        while done < SIZE:
            done += os.copy_file_range(fi, fo, SIZE - done, source_at + done, dest_at + done)
        return time.perf_counter() - began
    finally:
        os.close(fi)
        os.close(fo)
        os.unlink(dst)
        os.sync()


def dest_in_phase(source_at, modulus):
    """An offset near 5 MiB equal to source_at modulo `modulus`, but not modulo 2 * modulus."""
    base = 5 * M + 333 * 4096 + 1344
    dest = base - (base - source_at) % modulus
    if (dest - source_at) % (2 * modulus) == 0:
        dest += modulus
    return dest


def main():
    src = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    if os.path.getsize(src) < SIZE + 8 * M:
        sys.exit(f"{src}: needs at least {SIZE + 8 * M} bytes")
    dst = src + ".copy-bench"
    source_at = 7 * M + 1344  # 64-byte aligned, as torch places records
    cases = {"2 MiB": source_at + 2 * M}
    for name, modulus in [("1 MiB", M), ("256 KiB", 256 << 10), ("64 KiB", 64 << 10), ("16 KiB", 16 << 10),
                          ("4 KiB", 4 << 10)]:
        cases[name] = dest_in_phase(source_at, modulus)
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, dest_at in cases.items():
            times[name].append(copy_once(src, dst, source_at, dest_at))
    print("| same offset within | s per GiB (median of %d) |" % rounds)
    print("|---|---|")
    for name, t in times.items():
        t.sort()
        print("| %s | %.3f |" % (name, t[len(t) // 2]))


if __name__ == "__main__":
    main()
