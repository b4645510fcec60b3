"""One-off A/B (bench/FINDINGS.md#the-dense-audits-sample-cached-audit_cache_ab), run from the repository root:
the dense audit reading its sample from the cache (hybrid.chunk_audit_sample) against from the partition,
on the kept 1M database, alternating query by query (ABBA), two passes, the second kept."""
import json, sys, time
from pathlib import Path
import numpy as np, psycopg, psycopg.rows
sys.path.insert(0, "bench")
import latency as L
from pyhybrid import migrate

data_dir = Path("/tmp/pyhybrid-bench-latency")
admin = L.configure_server(data_dir, L.start_embedded(data_dir))
db = "bench_latency_1000000"
migrate.upgrade(L.dsn_for(admin, db))
world, _, sizes, tenants = L.generate(20240501, 1000000)
picks = [(label, tenants[i]) for label, i in L.choose_picks(sizes)]
adm = psycopg.connect(L.dsn_for(admin, db), autocommit=True)
t0 = time.perf_counter()
refreshed = adm.execute("SELECT * FROM hybrid.refresh_audit_samples()").fetchall()
out = {"refresh_all_s": round(time.perf_counter() - t0, 2), "cached_rows": sum(r[1] for r in refreshed),
       "cached_partitions": sum(1 for r in refreshed if r[1] > 0),
       "cache_mb": float(adm.execute("SELECT round(pg_total_relation_size('hybrid.chunk_audit_sample') / 1048576.0, 1)").fetchone()[0])}
state = {r[0]: r for r in adm.execute("SELECT tenant_key, base, sample_rows FROM hybrid.chunk_audit_sample_state").fetchall()}
client = L.connect(L.dsn_for(admin, db, L.APP_ROLE)).__enter__()

def ctl():
    t = time.perf_counter(); sum(i * i for i in range(3_000_000)); return round((time.perf_counter() - t) * 1000, 1)

out["control_start"] = ctl()
rng = np.random.default_rng(99)
for label, td in picks:
    key = adm.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = %s", (td.tenant_id,)).fetchone()[0]
    t0 = time.perf_counter()
    adm.execute("SELECT * FROM hybrid.refresh_audit_samples(%s)", (td.tenant_id,))
    out[label + "_refresh_s"] = round(time.perf_counter() - t0, 3)
    st = adm.execute("SELECT tenant_key, base, sample_rows FROM hybrid.chunk_audit_sample_state WHERE tenant_key = %s", (key,)).fetchone()
    out[label + "_sample_rows"] = st[2]
    qs = L.make_queries(world, td, 150, rng)
    def mode(cached):
        if cached:
            adm.execute("INSERT INTO hybrid.chunk_audit_sample_state (tenant_key, base, sample_rows) VALUES (%s, %s, %s) "
                        "ON CONFLICT DO NOTHING", st)
        else:
            adm.execute("DELETE FROM hybrid.chunk_audit_sample_state WHERE tenant_key = %s", (key,))
    for pas in range(2):
        t = {(m, k): [] for m in ("cached", "partition") for k in ("dense", "hybrid")}
        same = 0
        for i, q in enumerate(qs):
            order = ["cached", "partition"] if i % 4 in (0, 3) else ["partition", "cached"]
            lists = {}
            for m in order:
                mode(m == "cached")
                r = L.Runner(client, td.tenant_id)
                t[(m, "dense")].append(r.dense(q)[0] * 1000)
                t[(m, "hybrid")].append(r.hybrid_retrieve(q)[0] * 1000)
                with client.connection() as conn, conn.transaction():
                    conn = conn.cursor(row_factory=psycopg.rows.tuple_row)
                    conn.execute(L.SET_TENANT, (td.tenant_id,))
                    ids = [x[0] for x in conn.execute(L.DENSE_SQL, (L.vector_literal(q.vector), L.PER_SOURCE_K)).fetchall()]
                    lists[m] = (ids, conn.execute("SELECT current_setting('hybrid.dense_audit'), "
                                                   "current_setting('hybrid.dense_audit_sample')").fetchone())
            assert lists["cached"][1][1] == "cached" and lists["partition"][1][1] == "partition", lists
            same += lists["cached"][0] == lists["partition"][0] and lists["cached"][1][0] == lists["partition"][1][0]
        res = {f"{m}_{k}": {p: round(float(np.percentile(x, p)), 2) for p in (50, 95, 99)} for (m, k), x in t.items()}
        res["same_list_and_verdict"] = f"{same}/{len(qs)}"
    mode(True)
    out[label] = res
    out[label + "_control_after"] = ctl()
    print(json.dumps(out, default=str), flush=True)
out["control_end"] = ctl()
print(json.dumps(out, indent=1))
Path("bench/results/audit_cache_ab.json").write_text(json.dumps(out, indent=1))
