"""Writes the small seed corpora fuzz/corpus/{cast,finite}/ (run from the repo root).

The seeds only give libFuzzer a start in each region of the input format (see the
comments at the top of fuzz_cast.c / fuzz_finite.c); it mutates from there.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# interesting element bytes: float32 specials, float16/bfloat16 specials, ints
F32 = [0.0, -0.0, 1.0, -1.5, 65504.0, 65520.0, 3.0e38, 1e-40, 5.96e-8, 2.0**-25]
F32_BITS = [0x7F800000, 0xFF800000, 0x7FC00001, 0x7F800001, 0x33000001, 0x477FEFFF]
VALUES = b"".join(struct.pack("<f", v) for v in F32) + b"".join(
    struct.pack("<I", u) for u in F32_BITS) + bytes(
    [0x00, 0x7C, 0x01, 0x7E, 0xFF, 0x7B, 0x80, 0x7F, 0xC1, 0xFF, 0x01, 0x00, 0x00, 0x80])


def write(dirname, name, data):
    d = os.path.join(HERE, "corpus", dirname)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def cast_seeds():
    for s in range(8):
        for d in range(8):
            # 1-d, long contiguous run (SIMD body + tail), stride 1, AVX-512 level
            write("cast", f"c1_{s}{d}", bytes([s, d, 2, 1, 200, 1]) + VALUES)
            # 2-d, transposed destination, negative / broadcast source strides
            write("cast", f"c2_{s}{d}", bytes([s, d, (s + d) % 3, 2 | 8, 5, 0xFD, 7, 0]) + VALUES)
    # contiguous entry points and in-place
    for k in range(4):
        write("cast", f"contig_{k}", bytes([k, 0, k % 3, 4, 0x01, 0x21]) + VALUES)
    write("cast", "inplace", bytes([0, 5, 2, 3 | 16, 3, 6, 4, 1, 5, 0xFF]) + VALUES)
    write("cast", "scalar", bytes([3, 1, 0, 0]) + VALUES)


def finite_seeds():
    for sel in list(range(13)) + [200]:
        for lvl in range(3):
            head = bytes([3, lvl, sel, (sel & 3)])
            if sel >= 13:
                head += struct.pack("<f", 1.0 / 1024)
            tensors = bytes([0, 33, 0, 1, 0x10, 0x01, 2, 17, 0])
            write("finite", f"f_{sel}_{lvl}", head + tensors + VALUES)
    write("finite", "empty", bytes([2, 2, 1, 0, 1, 0, 0, 0, 5, 0]))


if __name__ == "__main__":
    cast_seeds()
    finite_seeds()
