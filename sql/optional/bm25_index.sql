-- BM25 over chunk content: runs once, only where pg_textsearch is available.
CREATE EXTENSION IF NOT EXISTS pg_textsearch;
CREATE INDEX chunk_content_bm25 ON hybrid.chunk USING bm25 (content) WITH (text_config = 'english');
