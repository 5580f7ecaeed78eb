"""Benchmark: the environment fingerprint a run records, first in a process and again.

Measures, in one process: the distributions this process imported (the distribution table is
read once per process), and the embedded model file's sha256 (hashed once per process, then
kept by path, size and mtime). Target: a second fingerprint costs under 1% of the first, so an
eval of many cases, or a long-lived process running many agents, pays for the model file once.

Usage: .venv/bin/python benchmarks/environment_fingerprint.py [--smoke]
"""

from __future__ import annotations

import argparse
import time

TARGET_RATIO = 0.01


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke", action="store_true", help="checks the benchmark runs, no figures to read"
    )
    args = parser.parse_args()
    import twinflow.cli._main  # noqa: F401  (what a command has imported before it fingerprints)
    from twinflow.kernel._environment import file_sha256, imported_distributions

    try:
        from twinflow.models._embedded import embedded_model_file

        model = embedded_model_file()
    except Exception:  # the demo extra is not installed: the distributions alone
        model = None
    start = time.perf_counter()
    imported_distributions()
    if model is not None:
        file_sha256(model, cached=True)
    first = time.perf_counter() - start
    start = time.perf_counter()
    imported_distributions()
    if model is not None:
        file_sha256(model, cached=True)
    again = time.perf_counter() - start
    if args.smoke:
        return
    size = (
        "no model file" if model is None else f"model file {model.stat().st_size // 1_000_000} MB"
    )
    print(f"first fingerprint   {first * 1000:8.1f} ms ({size})")
    print(f"again               {again * 1000:8.3f} ms (ratio {again / first:.5f})")
    verdict = "ok" if again / first <= TARGET_RATIO else "OVER TARGET"
    print(f"target: again under {TARGET_RATIO:.0%} of the first: {verdict}")


if __name__ == "__main__":
    main()
