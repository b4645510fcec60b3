-- pyhybrid 0.3: embeddings stored in the row (STORAGE MAIN) instead of TOAST. pgvector's type
-- defaults to EXTERNAL, so a chunk whose row passes ~2 kB (a 384-d vector is 1,544 bytes, plus its
-- text and tsvector) had its embedding moved out of line: an exact scan then fetched every vector
-- from the TOAST table, 34 ms against 4.7 ms over 5,000 such rows (measured). MAIN keeps the vector
-- in the row and moves the text and tsvector out first; a vector too large for any row still goes
-- out of line. Catalog only, instant: rows are laid out anew as they are written (new chunks, a
-- changed chunk re-ingested, a tenant imported), existing ones stay as they are.
ALTER TABLE hybrid.chunk ALTER COLUMN embedding SET STORAGE MAIN;
