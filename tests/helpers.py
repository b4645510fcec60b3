"""Small deterministic corpora for tests."""

from __future__ import annotations

import numpy as np

from pyhybrid import Chunk

DIM = 384


def unit(seed: int, dim: int = DIM) -> np.ndarray:
    """A deterministic random unit vector."""
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def near(base: np.ndarray, seed: int, noise: float) -> np.ndarray:
    """A unit vector close to base."""
    v = base + noise * unit(seed)
    return v / np.linalg.norm(v)


def chunks(prefix: str, n: int, *, doc_size: int = 1, seed: int = 0, **extra: object) -> list[Chunk]:
    """n chunks with embeddings and text mentioning their number."""
    out = []
    for i in range(n):
        out.append(Chunk(
            chunk_id=f"{prefix}-{i}", document_id=f"{prefix}-doc-{i // doc_size}", position=i % doc_size,
            content=f"{prefix} chunk number {i} about pumps, valves and alarms item{i}",
            embedding=unit(seed * 100000 + i), metadata={"i": i, "lang": "en" if i % 2 == 0 else "de"},
            **extra,  # type: ignore[arg-type]
        ))
    return out
