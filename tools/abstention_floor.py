"""How hybrid.calibrate_abstention's default floor was chosen, over the shared collections' reference embeddings.

Each collection is a tenant: its own judged queries are on topic (they should be answered), the other three
collections' are off topic (they should be abstained on); a query is answered when its best cosine similarity to the
tenant's documents reaches the floor (the dense test alone: the engine also answers a lexical hit holding every query
term). A floor is a statistic of the tenant's own chunks times a factor: the factor is picked on three collections
(the best mean of the two shares) and tried on the fourth. Then the kept rule (0.73 x the median similarity of a
chunk to its 10th most similar chunk of another document) beside the 0.96 quantile of random pairs, for two samples,
and on tenants that hold three collections with the fourth's queries off topic.

    python tools/abstention_floor.py [--datasets ../shared/datasets]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

NAMES = ["cranfield", "cisi", "cacm", "scifact"]
FACTORS = np.round(np.arange(0.5, 1.3, 0.01), 2)


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


def statistics(docs: np.ndarray, rng: np.random.Generator, sample: int = 400) -> dict[str, float]:
    """Candidate statistics of a tenant's chunks, from a sample (each document is one chunk here)."""
    idx = rng.choice(len(docs), min(sample, len(docs)), replace=False)
    sims = docs[idx] @ docs.T
    sims[np.arange(len(idx)), idx] = -1  # not itself
    nn = -np.sort(-sims, axis=1)
    out = {f"nn{k}_q{q}": float(np.quantile(nn[:, k - 1], q)) for k in (1, 3, 5, 10, 20) for q in (0.05, 0.1, 0.25, 0.5)}
    s = docs[idx]
    out["pairs_q0.96"] = float(np.quantile((s @ s.T)[np.triu_indices(len(s), 1)], 0.96))
    return out


def shares(on: np.ndarray, off: np.ndarray, floor: float) -> tuple[float, float]:
    return float(np.mean(on >= floor)), float(np.mean(off < floor))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    args = p.parse_args()
    docs, queries = load(args.datasets)
    best = {b: {a: (queries[a] @ docs[b].T).max(axis=1) for a in NAMES} for b in NAMES}
    on = {b: best[b][b] for b in NAMES}
    off = {b: np.concatenate([best[b][a] for a in NAMES if a != b]) for b in NAMES}
    stats = {b: statistics(docs[b], np.random.default_rng(1)) for b in NAMES}
    print("factor picked on three collections, tried on the fourth: factor, answered / abstained")
    for key in stats[NAMES[0]]:
        row = []
        for held in NAMES:
            train = [b for b in NAMES if b != held]
            c = max(FACTORS, key=lambda f: np.mean([np.mean(shares(on[b], off[b], f * stats[b][key])) for b in train]))
            a, o = shares(on[held], off[held], c * stats[held][key])
            row.append(f"{held} {c:.2f} {a:.3f}/{o:.3f}")
        print(f"  {key:<12} " + "  ".join(row))

    def rules(d: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
        st = statistics(d, rng)
        return {"neighbour (0.73 x nn10 median)": 0.73 * st["nn10_q0.5"], "random pairs (0.96)": st["pairs_q0.96"]}

    print("\nfloors (0.25 to 0.65, by 0.005) with at least 0.95 answered and 0.9 abstained")
    for b in NAMES:
        ok = [f for f in np.arange(0.25, 0.65, 0.005)
              if shares(on[b], off[b], f)[0] >= 0.95 and shares(on[b], off[b], f)[1] >= 0.9]
        print(f"  {b:<9} " + (f"{min(ok):.3f} to {max(ok):.3f}" if ok else "none"))
    print("\nsingle-topic tenants: floor, answered, abstained")
    for seed in (1, 2):
        for b in NAMES:
            got = rules(docs[b], np.random.default_rng(seed))
            print(f"  seed {seed} {b:<9} " + " | ".join(
                f"{name} {f:.3f}: {shares(on[b], off[b], f)[0]:.3f} {shares(on[b], off[b], f)[1]:.3f}"
                for name, f in got.items()))
    print("\nthree collections in one tenant, the fourth's queries off topic: floor, answered, abstained")
    for held in NAMES:
        inside = [n for n in NAMES if n != held]
        d = np.concatenate([docs[n] for n in inside])
        mixed_on = np.concatenate([(queries[n] @ d.T).max(axis=1) for n in inside])
        mixed_off = (queries[held] @ d.T).max(axis=1)
        got = rules(d, np.random.default_rng(1))
        print(f"  without {held:<9} " + " | ".join(
            f"{name} {f:.3f}: {shares(mixed_on, mixed_off, f)[0]:.3f} {shares(mixed_on, mixed_off, f)[1]:.3f}"
            for name, f in got.items()))


if __name__ == "__main__":
    main()
