"""Time hybrid.create_tenant for 1,000 tenants (latency.setup_database, the code path of latency.py --tenants 1000) in a scratch database on the embedded server at argv[1], then drop it; prints JSON."""
import sys, time, json, statistics
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L
import psycopg
from psycopg import sql
from pyhybrid.server import start_embedded
L.N_TENANTS = 1000
admin = start_embedded(Path(sys.argv[1]))
ms = []
t0 = time.perf_counter()
L.setup_database(admin, "bench_create_tenants_1000", ms)
wall = time.perf_counter() - t0
out = {"tenants": len(ms), "setup_database_s": round(wall, 2), "calls_total_s": round(sum(ms) / 1000, 2),
       "p50_ms": round(L.pct(ms, 50), 2), "p95_ms": round(L.pct(ms, 95), 2), "max_ms": round(max(ms), 2),
       "mean_ms": round(statistics.fmean(ms), 2), "first_100_mean_ms": round(statistics.fmean(ms[:100]), 2),
       "last_100_mean_ms": round(statistics.fmean(ms[-100:]), 2)}
with psycopg.connect(L.dsn_for(admin, "bench_create_tenants_1000")) as c:
    out["tenants_in_db"] = c.execute("select count(*) from hybrid.tenant").fetchone()[0]
    out["relations_in_hybrid_schema"] = c.execute("select count(*) from pg_class where relnamespace = 'hybrid'::regnamespace").fetchone()[0]
with psycopg.connect(admin, autocommit=True) as c:
    c.execute("DROP DATABASE bench_create_tenants_1000 WITH (FORCE)")
out["loadavg"] = list(__import__("os").getloadavg())
out["ms"] = [round(x, 2) for x in ms]
print(json.dumps(out))
