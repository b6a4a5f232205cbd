"""The encoder engine: embeddings and reranking on a plain onnxruntime session.

- tokenize.py: texts (or pairs) to token ids with the ``tokenizers`` library, never truncating
  unless asked;
- pooling.py: hidden states to one vector per input (mean, CLS, last token), normalisation and
  Matryoshka truncation;
- runner.py: the onnxruntime session and the padded batch it runs;
- worker.py: the owner thread that micro-batches concurrent requests.
"""
