"""One-off (issue 22): the graph branch with entity hubs and ACL-restricted chunks, two engines side by side.

  python hub_bench.py build DBNAME      (run from the checkout whose engine to install)
  python hub_bench.py measure DB_A DB_B (alternates queries between the two databases)
"""
import json
import os
import random
import statistics
import sys
import time

import psycopg
from psycopg import conninfo

ADMIN = os.environ.get("PYHYBRID_BENCH_ADMIN_DSN", "host=/tmp/dev/pgdata user=postgres")
N_CHUNKS = 20000
N_HUBS = 20
HUB_FANIN = 1500  # chunks linking to each hub
RESTRICTED = 0.35


def build(name: str) -> None:
    from pyhybrid import Chunk, HybridClient, migrate
    with psycopg.connect(ADMIN, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{name}"')
    dsn = conninfo.make_conninfo(ADMIN, dbname=name)
    migrate.upgrade(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant('acme')")
        c.execute("SELECT hybrid.grant_app('pyh_app')")
        c.execute("SELECT hybrid.grant_tenant('pyh_acme', 'acme', ARRAY['public'])")
    rnd = random.Random(7)
    words = [f"w{i}" for i in range(3000)]
    chunks = [Chunk(chunk_id=f"c{i}", document_id=f"d{i // 5}", position=i % 5,
                    content=" ".join(rnd.choice(words) for _ in range(30)),
                    acl_labels=["secret"] if rnd.random() < RESTRICTED else [])
              for i in range(N_CHUNKS)]
    edges = []
    for h in range(N_HUBS):
        for i in rnd.sample(range(N_CHUNKS), HUB_FANIN):
            edges.append({"src": f"c{i}", "dst": f"acme:entity:hub{h}", "rel": "MENTIONS"})
    for i in range(N_CHUNKS):
        for j in rnd.sample(range(N_CHUNKS), 2):
            if i != j:
                edges.append({"src": f"c{i}", "dst": f"c{j}", "rel": "CITES"})
    app = conninfo.make_conninfo(dsn, user="pyh_app", password="pyh_app")
    with HybridClient(app) as client, client.tenant("acme", ["*"]) as t:
        for k in range(0, len(chunks), 5000):
            t.ingest(chunks[k:k + 5000])
        t.add_edges(edges)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("ANALYZE")
    print(f"built {name}: {N_CHUNKS} chunks, {len(edges)} edges")


QUERIES = {
    "search_graph 1 hop (tenant role, restricted)": (
        "pyh_acme", None,
        "SELECT count(*) FROM hybrid.search_graph(%(seeds)s, 1, 30)"),
    "hybrid_retrieve graph_seeds 1 hop (tenant role, restricted)": (
        "pyh_acme", None,
        "SELECT count(*) FROM hybrid_retrieve(graph_seeds => %(seeds)s)"),
    "search_graph 2 hops (tenant role, restricted)": (
        "pyh_acme", None,
        "SELECT count(*) FROM hybrid.search_graph(%(seeds)s, 2, 30)"),
    "search_graph 2 hops from a hub (tenant role, restricted)": (
        "pyh_acme", None,
        "SELECT count(*) FROM hybrid.search_graph(%(hub)s, 2, 30)"),
    "graph_node entities (app role, no label)": (
        "pyh_app", "",
        "SELECT count(*) FROM hybrid.graph_node WHERE kind = 'entity'"),
    "graph_node one entity (app role, no label)": (
        "pyh_app", "",
        "SELECT count(*) FROM hybrid.graph_node WHERE node_id = %(hubid)s"),
}


def measure(a: str, b: str, reps: int = 60) -> None:
    rnd = random.Random(11)
    conns = {}
    for db in (a, b):
        for role in ("pyh_acme", "pyh_app"):
            c = psycopg.connect(conninfo.make_conninfo(ADMIN, dbname=db, user=role, password=role), autocommit=True)
            c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
            conns[db, role] = c
    out = {}
    for name, (role, labels, sql) in QUERIES.items():
        times = {a: [], b: []}
        for r in range(reps):
            args = {"seeds": [f"c{rnd.randrange(N_CHUNKS)}" for _ in range(3)],
                    "hub": [f"acme:entity:hub{rnd.randrange(N_HUBS)}"], "hubid": f"acme:entity:hub{rnd.randrange(N_HUBS)}"}
            order = (a, b) if r % 2 == 0 else (b, a)
            for db in order:
                c = conns[db, role]
                if labels is not None:
                    c.execute("SELECT set_config('hybrid.acl_labels', %s, false)", (labels,))
                t0 = time.perf_counter()
                c.execute(sql, args).fetchall()
                times[db].append((time.perf_counter() - t0) * 1000)
        row = {}
        for db in (a, b):
            ts = sorted(times[db][5:])
            row[db] = {"p50_ms": round(statistics.median(ts), 3), "p95_ms": round(ts[int(len(ts) * 0.95) - 1], 3)}
        row["ratio_p50"] = round(row[b]["p50_ms"] / row[a]["p50_ms"], 2)
        out[name] = row
        print(name, json.dumps(row))
    json.dump(out, open(os.environ.get("PYHYBRID_BENCH_OUT", "graph_acl_cost.json"), "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2])
    else:
        measure(sys.argv[2], sys.argv[3])
