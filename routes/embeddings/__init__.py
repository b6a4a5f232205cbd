"""The encoder doors: /v1/embeddings, /v1/rerank (+ /rerank, /v2/rerank) and /v1/score."""
