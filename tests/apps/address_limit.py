"""Maps many small files under an address-space limit (ulimit -v).

    python3 address_limit.py DIR COUNT

Creates COUNT files of 8 KiB in DIR, maps each (MAP_SHARED, read-write)
and keeps every mapping, writes one byte through each, then allocates
64 MiB on the heap (malloc's own mmap, which no interposer sees). Prints
how many mappings it made and a digest of what it read back through them;
exits 1 on the first failure (ENOMEM), as a program would.
"""
import hashlib
import mmap
import os
import sys


def main():
    d, count = sys.argv[1], int(sys.argv[2])
    maps = []
    for i in range(count):
        path = os.path.join(d, "f%05d" % i)
        with open(path, "wb") as f:
            f.write(bytes([i % 251]) * 8192)
        fd = os.open(path, os.O_RDWR)
        try:
            maps.append(mmap.mmap(fd, 8192))
        except OSError as e:
            print("mapping %d failed: %s" % (i, e))
            return 1
        finally:
            os.close(fd)
        maps[-1][i % 8192] = 255
    try:
        heap = bytearray(64 << 20)
    except MemoryError:
        print("64 MiB on the heap failed after %d mappings" % count)
        return 1
    digest = hashlib.sha256()
    for m in maps:
        digest.update(m[:])
    print("mapped %d files, heap %d MiB, digest %s" % (len(maps), len(heap) >> 20, digest.hexdigest()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
