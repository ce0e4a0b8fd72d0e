"""Nearest items at an edge: Qdrant Edge against the project's own numpy index, on the same
work (issue 29, item 3: an edge that retrieves each known user's own candidates).

The work: a catalog of unit item vectors (dimension 128, as shipped), clustered like a
shop's (categories, and sub-styles inside each), and user vectors like the users' posterior
means (a blend of a few sub-styles' directions, with noise). Each query asks for the
``--k`` items of highest dot product (175 by default: the origin's collaborative share of a
500-candidate retrieval). The truth is the exact float32 scan, in the same process.

The engines, each built from the same vectors in a process of its own (so that its memory
is its own):

- ``numpy_exact``: the whole float32 matrix times the query, then ``argpartition``. What an
  edge would do without an index; 512 B an item, above the budget of 32 MB at 100K.
- ``numpy_ivf_i8``: the edge's own lists (``relevance.quantized_lists``, what an edge
  ships with): the origin's inverted-file clustering (``relevance.coarse_index``:
  spherical k-means into about sqrt(n)/2 lists; the closest lists scanned until 16 rows per
  result, at least 6,000, are seen), each vector held as int8 with a float32 scale of its
  own (132 B an item with its int32 id), scored as (codes . query) x scale.
- ``qdrant_edge``: Qdrant Edge (``qdrant-edge-py``, the Qdrant engine in-process) with its
  defaults for a shard like this one: an HNSW graph (m 16, ef_construct 100), int8 scalar
  quantization held in RAM, the float32 originals on disk (memory-mapped) for rescoring,
  one search thread (an edge's event loop is one core); queried at ``hnsw_ef`` of 1, 2, 4
  and 8 times k, and compared at the cheapest of those whose recall reaches the numpy
  index's (``against_qdrant``).

Per engine and size: build time (from float32 vectors to an index on disk), load time (a
process that never held the vectors opens the index: ``EdgeShard.load``, or
``numpy.load`` of the index's arrays), memory (what the load and the queries add to that
process: resident anonymous memory, and file-backed pages, which the kernel may evict),
query latency (p50/p99 over ``--queries`` queries one at a time, after a warm-up, ids back
as a numpy array) and recall@k against the exact scan.

Run: ``make bench-deps && .venv/bin/python -m benchmarks.edge_vectors`` (``--sizes``,
default 10000,100000,1000000: about 6 minutes, most of it Qdrant's graph at 1M).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.report import finish, percentile
from relevance.quantized_lists import QuantizedLists, quantized

Matrix = npt.NDArray[np.float32]
Rows = npt.NDArray[np.intp]

DIM = 128
CATEGORIES = 20
STYLES_PER_CATEGORY = 10
ENGINES = ("numpy_exact", "numpy_ivf_i8", "qdrant_edge")
BUDGET_MB_AT_100K = 32
WARM_UP = 20
EF_GRID = (1, 2, 4, 8)  # Qdrant's hnsw_ef as multiples of k


# --- the work ------------------------------------------------------------------------------


def _unit(m: npt.NDArray[np.floating[Any]]) -> Matrix:
    unit: Matrix = (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)
    return unit


def catalog(n: int, seed: int) -> Matrix:
    """``n`` unit vectors: a category's direction, a style's inside it, the item's own."""
    rng = np.random.default_rng(seed)
    categories = _unit(rng.standard_normal((CATEGORIES, DIM)).astype(np.float32))
    styles = _unit(
        np.repeat(categories, STYLES_PER_CATEGORY, axis=0)
        + 0.7 * _unit(rng.standard_normal((CATEGORIES * STYLES_PER_CATEGORY, DIM)))
    )
    out = np.empty((n, DIM), np.float32)
    chunk = 100_000
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        style = rng.integers(0, styles.shape[0], size=m)
        own = _unit(rng.standard_normal((m, DIM)).astype(np.float32))
        out[start : start + m] = _unit(styles[style] + 0.9 * own)
    return out


def users(vectors: Matrix, count: int, seed: int) -> Matrix:
    """``count`` user vectors: the mean of a few items' directions (what a posterior mean
    learnt from a handful of engagements looks like), with noise."""
    rng = np.random.default_rng(seed + 1)
    liked = vectors[rng.integers(0, vectors.shape[0], size=(count, 3))].mean(axis=1)
    return _unit(liked + 0.3 * _unit(rng.standard_normal((count, DIM)).astype(np.float32)))


def truth(vectors: Matrix, queries: Matrix, k: int) -> list[set[int]]:
    sims = queries @ vectors.T
    return [set(np.argpartition(-row, k - 1)[:k].tolist()) for row in sims]


# --- the engines ---------------------------------------------------------------------------


class Engine(Protocol):
    def query(self, q: Matrix, k: int) -> Rows: ...


@dataclass
class NumpyExact:
    vectors: Matrix

    def query(self, q: Matrix, k: int) -> Rows:
        sims = self.vectors @ q
        top = np.argpartition(-sims, k - 1)[:k]
        return top[np.argsort(-sims[top], kind="stable")]


LIST_ARRAYS = ("centroids", "ids", "offsets", "codes", "scales")


def save_lists(lists: QuantizedLists, directory: Path) -> None:
    for name in LIST_ARRAYS:
        np.save(directory / f"{name}.npy", getattr(lists, name))


def load_lists(directory: Path) -> QuantizedLists:
    return QuantizedLists(**{n: np.load(directory / f"{n}.npy") for n in LIST_ARRAYS})


@dataclass
class NumpyIvf:
    """The edge's own lists (``relevance.quantized_lists``), ids being catalog rows."""

    index: QuantizedLists

    def query(self, q: Matrix, k: int) -> Rows:
        ids, _ = self.index.nearest(q, k)
        return ids.astype(np.intp)


class Qdrant:
    """A loaded shard queried at one ``hnsw_ef``; what does not change per query (the
    module, the search parameters) is looked up once, off the timed path."""

    def __init__(self, shard: Any, hnsw_ef: int) -> None:
        self.shard = shard
        self._qe = qdrant()
        self._params = self._qe.SearchParams(hnsw_ef=hnsw_ef)

    def query(self, q: Matrix, k: int) -> Rows:
        qe = self._qe
        found = self.shard.query(
            qe.QueryRequest(limit=k, query=qe.Query.Nearest(q.tolist()), params=self._params)
        )
        return np.fromiter((p.id for p in found), np.intp, len(found))


def qdrant_config() -> Any:
    qe = qdrant()
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(
            size=DIM,
            distance=qe.Distance.Dot,
            on_disk=True,
            quantization_config=qe.ScalarQuantizationConfig(
                type=qe.ScalarType.Int8, always_ram=True
            ),
        ),
        hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10_000),
        max_search_threads=1,
    )


def qdrant_build(vectors: Matrix, path: Path) -> Any:
    qe = qdrant()
    shard = qe.EdgeShard.create(str(path), qdrant_config())
    batch = 5_000
    for start in range(0, vectors.shape[0], batch):
        rows = vectors[start : start + batch].tolist()
        shard.update(
            qe.UpdateOperation.upsert_points([qe.Point(start + i, v) for i, v in enumerate(rows)])
        )
    shard.optimize()  # the HNSW graph and the quantized vectors, built now, not on query
    shard.flush()
    return shard


# --- one engine, one size, in a process of its own -----------------------------------------


def _memory_kb() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("RssAnon", "RssFile"):
            fields[name] = int(value.split()[0])
    return fields


def build(engine_name: str, size: int, args: argparse.Namespace) -> None:
    """Make the work (the catalog, the users, the exact answers) and the engine's index,
    all saved under ``args.dir``; print the build time."""
    queries, k, seed, where = args.queries, args.k, args.seed, args.dir
    vectors = catalog(size, seed)
    asked = users(vectors, queries + WARM_UP, seed)
    np.save(where / "asked.npy", asked)
    exact = np.array([sorted(t) for t in truth(vectors, asked[WARM_UP:], k)], np.intp)
    np.save(where / "truth.npy", exact)
    index = where / "index"
    index.mkdir()
    started = time.perf_counter()
    if engine_name == "numpy_exact":
        np.save(index / "vectors.npy", vectors)
    elif engine_name == "numpy_ivf_i8":
        codes, scales = quantized(vectors)
        ids = np.arange(size, dtype=np.int32)
        save_lists(QuantizedLists.build(ids, codes, scales), index)
    else:
        qdrant_build(vectors, index).close()
    print(json.dumps({"build_s": round(time.perf_counter() - started, 2)}))


def serve(engine_name: str, k: int, where: Path) -> None:
    """In a process that never held the vectors: load the index as a starting edge would
    (its memory: what the load and the queries add to the process) and query it, one query
    at a time on one thread; for Qdrant, at each of ``EF_GRID`` times ``k``."""
    asked = np.load(where / "asked.npy")
    exact = np.load(where / "truth.npy")
    index = where / "index"
    gc.collect()
    before = _memory_kb()
    started = time.perf_counter()
    engines: list[tuple[str, Engine]]
    if engine_name == "numpy_exact":
        engines = [(engine_name, NumpyExact(np.load(index / "vectors.npy")))]
    elif engine_name == "numpy_ivf_i8":
        engines = [(engine_name, NumpyIvf(load_lists(index)))]
    else:
        shard = qdrant().EdgeShard.load(str(index))
        engines = [(f"qdrant_edge ef {m * k}", Qdrant(shard, m * k)) for m in EF_GRID]
    load_s = time.perf_counter() - started
    out = []
    with threadpool_limits(limits=1, user_api="blas"):
        for name, engine in engines:
            for q in asked[:WARM_UP]:
                engine.query(q, k)
            latencies: list[float] = []
            recalls: list[float] = []
            for q, want in zip(asked[WARM_UP:], exact, strict=True):
                t = time.perf_counter()
                got = engine.query(q, k)
                latencies.append((time.perf_counter() - t) * 1e6)
                recalls.append(np.intersect1d(want, got).size / k)
            out.append(
                {
                    "engine": name,
                    "p50_us": round(percentile(latencies, 50), 1),
                    "p99_us": round(percentile(latencies, 99), 1),
                    "recall": round(float(np.mean(recalls)), 4),
                }
            )
    after = _memory_kb()
    memory = {
        "load_s": round(load_s, 3),
        "anon_mb": round((after["RssAnon"] - before["RssAnon"]) / 1024, 1),
        "file_mb": round((after["RssFile"] - before["RssFile"]) / 1024, 1),
    }
    print(json.dumps([{**row, **memory} for row in out]))


def _child(args: list[str]) -> Any:
    command = [sys.executable, "-m", "benchmarks.edge_vectors", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(engine: str, size: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="edge_vectors_") as scratch:
        common = ["--k", str(args.k), "--dir", scratch]
        sized = ["--sizes", str(size), "--queries", str(args.queries), "--seed", str(args.seed)]
        built = _child(["--build", engine, *sized, *common])
        rows: list[dict[str, Any]] = _child(["--serve", engine, *common])
    return [{"items": size, **built, **row} for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=175)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--build", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--serve", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: comma-separated integers, not {args.sizes!r}")
    if any(s < args.k for s in sizes) or args.k < 1 or args.queries < 1:
        parser.error("--sizes must each hold at least --k items; --k and --queries >= 1")
    engines = args.engines.split(",")
    if unknown := set(engines) - set(ENGINES):
        parser.error(f"--engines: unknown {sorted(unknown)}; known: {', '.join(ENGINES)}")
    if args.build:
        build(args.build, sizes[0], args)
        return
    if args.serve:
        serve(args.serve, args.k, args.dir)
        return
    if "qdrant_edge" in engines and not _has_qdrant():
        parser.error("qdrant-edge-py is not installed (the bench extra: make bench-deps)")
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    print(f"dimension {DIM}, k {args.k}, {args.queries} queries one at a time, seed {args.seed}")
    header = f"{'engine':<22}{'items':>10}{'build s':>9}{'load s':>8}{'anon MB':>9}"
    print(header + f"{'file MB':>9}{'p50 µs':>9}{'p99 µs':>9}{'recall':>8}")
    for size in sizes:
        for engine in engines:
            for r in measure(engine, size, args):
                rows.append(r)
                print(
                    f"{r['engine']:<22}{r['items']:>10,}{r['build_s']:>9.2f}{r['load_s']:>8.3f}"
                    f"{r['anon_mb']:>9.1f}{r['file_mb']:>9.1f}{r['p50_us']:>9.0f}"
                    f"{r['p99_us']:>9.0f}{r['recall']:>8.3f}"
                )
    finish(
        {
            "benchmark": "edge_vectors",
            "dim": DIM,
            "k": args.k,
            "queries": args.queries,
            "seed": args.seed,
            "results": rows,
            "against_qdrant": against_qdrant(rows),
            "budget_mb_at_100k": BUDGET_MB_AT_100K,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


def against_qdrant(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per size, the numpy index against the baseline: the cheapest Qdrant Edge setting
    whose recall is at least the numpy index's (less 0.005), else Qdrant's best recall
    (``qdrant_matches_recall`` false). Ratios are Qdrant's figure over ours: above 1, ours
    is faster or smaller."""
    out: dict[str, dict[str, Any]] = {}
    for size in sorted({r["items"] for r in rows}):
        ours = next((r for r in rows if r["items"] == size and r["engine"] == "numpy_ivf_i8"), None)
        theirs = [r for r in rows if r["items"] == size and r["engine"].startswith("qdrant")]
        if ours is None or not theirs:
            continue
        matching = [r for r in theirs if r["recall"] >= ours["recall"] - 0.005]
        pick = (
            min(matching, key=lambda r: r["p50_us"])
            if matching
            else max(theirs, key=lambda r: r["recall"])
        )
        out[str(size)] = {
            "qdrant": pick["engine"],
            "qdrant_matches_recall": bool(matching),
            "recall": [ours["recall"], pick["recall"]],
            "p50_ratio": round(pick["p50_us"] / ours["p50_us"], 2),
            "p99_ratio": round(pick["p99_us"] / ours["p99_us"], 2),
            "memory_ratio": round(
                (pick["anon_mb"] + pick["file_mb"]) / max(ours["anon_mb"] + ours["file_mb"], 0.1),
                2,
            ),
        }
    return out


def qdrant() -> Any:
    """The ``qdrant_edge`` module (the bench extra), imported when first used."""
    return importlib.import_module("qdrant_edge")


def _has_qdrant() -> bool:
    return importlib.util.find_spec("qdrant_edge") is not None


if __name__ == "__main__":
    main()
