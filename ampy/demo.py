"""python -m ampy.demo — the main job (placeholder until the training demo lands):
casts a float32 tensor to float16 and bfloat16 and back, and reports the round-trip
error and the speed of the casts."""
import time

import ampy


def main():
    ampy.manual_seed(0)
    x = ampy.randn(1 << 22)
    for dt in (ampy.float16, ampy.bfloat16):
        t0 = time.perf_counter()
        h = x.to(dt)
        t1 = time.perf_counter()
        back = h.float()
        err = max(abs(a - b) / max(abs(a), 1e-30) for a, b in zip(x[:1000].tolist(),
                                                                    back[:1000].tolist()))
        print(f"float32 -> {dt.name:9s}: {x.numel() / (t1 - t0) / 1e9:6.2f} Gelem/s, "
              f"max relative round-trip error {err:.2e}")


if __name__ == "__main__":
    main()
