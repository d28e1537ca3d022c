"""What timing a ``from_generator`` source around its calls costs a pipeline of cheap
elements (gpuwhy/tfapi/tfdata/generator_gaps.py: every dataset ``from_generator`` makes
under ``gpuwhy run`` is timed, so the cost is paid whether or not the gaps are used).

One process reads the same generator pipeline by turns with the origin hooks off and on
(a new dataset each round, so each is made with the hooks as they are), and prints the
median time per element of each side and their median paired ratio. Elements are
scalars read by a plain ``for`` loop: the dearest case, where TF's own Python per element
(``py_func``, conversion) is the least there is.

Run: .venv/bin/python benchmarks/bench_generator_gaps.py [--elements 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf

from gpuwhy.tfapi.tfdata.origins import install_origin_hooks


def numbers(n: int):
    for i in range(n):
        yield np.float32(i)


def read(n: int, batch: int) -> float:
    """Seconds per generator element to read a pipeline of ``n`` elements."""
    ds = tf.data.Dataset.from_generator(
        numbers, args=(n,), output_signature=tf.TensorSpec([], tf.float32)
    )
    if batch > 1:
        ds = ds.batch(batch)
    start = time.perf_counter()
    for _ in ds:
        pass
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=1, help="batch the elements (1: none)")
    args = parser.parse_args()
    read(2000, args.batch)  # warm-up: TF's first pipeline pays its imports
    plain, timed, ratios = [], [], []
    for _ in range(args.rounds):
        bare = read(args.elements, args.batch)
        patches = install_origin_hooks()
        try:
            hooked = read(args.elements, args.batch)
        finally:
            for patch in reversed(patches):
                patch.undo()
        plain.append(bare)
        timed.append(hooked)
        ratios.append(hooked / bare)
    print(f"elements {args.elements:,} per round, {args.rounds} rounds, batch {args.batch}")
    print(f"plain  median {statistics.median(plain) * 1e6:.1f} µs per element")
    print(f"timed  median {statistics.median(timed) * 1e6:.1f} µs per element")
    print(
        f"ratio  median {statistics.median(ratios):.3f} "
        f"({min(ratios):.3f}-{max(ratios):.3f}), "
        f"+{(statistics.median(timed) - statistics.median(plain)) * 1e6:.2f} µs per element"
    )


if __name__ == "__main__":
    main()
