-- pyhybrid 0.5: abstention compares the mean similarity of the dense branch's ten best hits with the tenant's floor,
-- not the best hit's. Runs exactly once per database (Alembic revision 0027).
--  * On the shared collections (each a tenant, its own queries on topic, the others' off topic) the ten best hits
--    told off-topic questions apart better than the best one: in the engine SciFact abstained on 0.952 of them, not
--    0.898, and CACM answered 0.981 of its own, not 0.962 (bench/quality.py --abstention; docs/searching.md).
--  * hybrid.calibrate_abstention's neighbour floor becomes 0.60 x the median similarity of a chunk to its 10th most
--    similar chunk of another document (0.73 x before), and a floor from random pairs 0.82 x their quantile: the
--    floors already stored are rescaled by 0.60 / 0.73 here, so that a tenant abstains as it would after a new
--    calibration without one.
--  * hybrid._abstains takes the ten best similarities (the mean and the best decide; a best hit 1.5 times the floor
--    answers alone): the old one is dropped here, sql/idempotent/060_retrieve.sql creates the new one.
UPDATE hybrid.tenant SET abstain_floor = abstain_floor * 0.60 / 0.73 WHERE abstain_floor IS NOT NULL;
DROP FUNCTION IF EXISTS hybrid._abstains(text, double precision, boolean, boolean);
