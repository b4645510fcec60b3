"""pyhybrid: hybrid retrieval (dense + lexical + graph, fused by RRF) inside PostgreSQL."""
