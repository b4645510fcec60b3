"""How hybrid.calibrate_abstention's default floor was chosen, over the shared collections' reference embeddings.

Each collection is a tenant: its own judged queries are on topic (they should be answered), the other three
collections' are off topic (they should be abstained on). A query's measure is the mean cosine similarity of its
`top` best hits in the tenant (top 1: the best hit alone; the dense test alone: the engine also answers a lexical hit
holding every query term). A floor is a statistic of the tenant's own chunks (the same mean over a chunk's most
similar chunks of other documents, or one neighbour's similarity) times a factor: the factor is picked on three
collections (the best mean of the two shares) and tried on the fourth. Then the kept rule (answered when the mean of
the ten best hits reaches 0.60 x the median similarity of a chunk to its 10th most similar chunk of another document,
or the best hit alone 1.5 times that) and its fallback (0.82 x the 0.96 quantile of random pairs) beside the rules
before them (the best hit against 0.73 x that median, or against the quantile itself), for two samples, and on
tenants that hold three collections with the fourth's queries off topic.

    python tools/abstention_floor.py [--datasets ../shared/datasets]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

NAMES = ["cranfield", "cisi", "cacm", "scifact"]
FACTORS = np.round(np.arange(0.4, 1.3, 0.01), 2)


def load(root: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    def unit(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    docs, queries = {}, {}
    for n in NAMES:
        docs[n] = unit(np.load(root / n / "corpus.minilm.f16.npy"))
        ids = (root / n / "queries.ids.txt").read_text().split()
        judged = {line.split("\t")[0] for line in (root / n / "qrels.tsv").read_text().splitlines()[1:] if line.strip()}
        queries[n] = unit(np.load(root / n / "queries.minilm.f16.npy"))[[i for i, q in enumerate(ids) if q in judged]]
    return docs, queries


def measure(q: np.ndarray, docs: np.ndarray, top: int) -> np.ndarray:
    """Each query's mean similarity to its top best hits."""
    return -np.sort(-(q @ docs.T), axis=1)[:, :top].mean(axis=1)


def statistics(docs: np.ndarray, rng: np.random.Generator, sample: int = 400) -> dict[str, float]:
    """Candidate statistics of a tenant's chunks, from a sample (each document is one chunk here)."""
    idx = rng.choice(len(docs), min(sample, len(docs)), replace=False)
    sims = docs[idx] @ docs.T
    sims[np.arange(len(idx)), idx] = -1  # not itself
    nn = -np.sort(-sims, axis=1)
    out = {f"nn{k}_q{q}": float(np.quantile(nn[:, k - 1], q)) for k in (1, 5, 10, 20) for q in (0.1, 0.25, 0.5)}
    out |= {f"mean{k}_q{q}": float(np.quantile(nn[:, :k].mean(axis=1), q)) for k in (5, 10) for q in (0.25, 0.5)}
    s = docs[idx]
    out["pairs_q0.96"] = float(np.quantile((s @ s.T)[np.triu_indices(len(s), 1)], 0.96))
    return out


def shares(on: np.ndarray, off: np.ndarray, floor: float) -> tuple[float, float]:
    return float(np.mean(on >= floor)), float(np.mean(off < floor))


RULES = {  # name: (statistic, factor, how many best hits are averaged, the best hit alone answers at this x the floor)
    "kept: mean of 10 or best (0.60 x nn10 median)": ("nn10_q0.5", 0.60, 10, 1.5),
    "kept, random pairs (0.82 x 0.96)": ("pairs_q0.96", 0.82, 10, 1.5),
    "mean of 10 alone (0.60 x nn10 median)": ("nn10_q0.5", 0.60, 10, None),
    "before: best hit (0.73 x nn10 median)": ("nn10_q0.5", 0.73, 1, None),
    "before, random pairs (0.96)": ("pairs_q0.96", 1.0, 1, None),
}


def held_out(docs: dict[str, np.ndarray], queries: dict[str, np.ndarray]) -> None:
    stats = {b: statistics(docs[b], np.random.default_rng(1)) for b in NAMES}
    for top in (1, 5, 10):
        on = {b: measure(queries[b], docs[b], top) for b in NAMES}
        off = {b: np.concatenate([measure(queries[a], docs[b], top) for a in NAMES if a != b]) for b in NAMES}
        print(f"\nmean of the {top} best hits: factor picked on three collections, tried on the fourth: "
              "factor, answered / abstained")
        for key in stats[NAMES[0]]:
            row = []
            for held in NAMES:
                train = [b for b in NAMES if b != held]
                c = max(FACTORS, key=lambda f: np.mean([np.mean(shares(on[b], off[b], f * stats[b][key])) for b in train]))
                a, o = shares(on[held], off[held], c * stats[held][key])
                row.append(f"{held} {c:.2f} {a:.3f}/{o:.3f}")
            print(f"  {key:<12} " + "  ".join(row))
        print(f"  floors (0.2 to 0.65, by 0.005) with at least 0.95 answered and 0.9 abstained: " + ", ".join(
            f"{b} " + (f"{min(ok):.3f}-{max(ok):.3f}" if (ok := [f for f in np.arange(0.2, 0.65, 0.005) if
                       shares(on[b], off[b], f)[0] >= 0.95 and shares(on[b], off[b], f)[1] >= 0.9]) else "none")
            for b in NAMES))


def rules(docs: np.ndarray, on_q: np.ndarray, off_q: np.ndarray, seed: int) -> str:
    st = statistics(docs, np.random.default_rng(seed))
    out = []
    for name, (key, factor, top, alone) in RULES.items():
        f = factor * st[key]

        def answered(q: np.ndarray) -> np.ndarray:
            ok = measure(q, docs, top) >= f
            return ok | (measure(q, docs, 1) >= alone * f) if alone else ok

        out.append(f"{name} {f:.3f}: {np.mean(answered(on_q)):.3f} {1 - np.mean(answered(off_q)):.3f}")
    return "\n      ".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    args = p.parse_args()
    docs, queries = load(args.datasets)
    held_out(docs, queries)
    print("\nsingle-topic tenants: floor, answered, abstained")
    for seed in (1, 2):
        for b in NAMES:
            off = np.concatenate([queries[a] for a in NAMES if a != b])
            print(f"  seed {seed} {b:<9} " + rules(docs[b], queries[b], off, seed))
    print("\nthree collections in one tenant, the fourth's queries off topic: floor, answered, abstained")
    for held in NAMES:
        inside = [n for n in NAMES if n != held]
        d = np.concatenate([docs[n] for n in inside])
        print(f"  without {held:<9} " + rules(d, np.concatenate([queries[n] for n in inside]), queries[held], 1))


if __name__ == "__main__":
    main()
