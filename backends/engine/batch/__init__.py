"""The ``batch`` scheduler strategy: continuous batching on the CPU over plain onnxruntime.

- ``decoder.py``: the model folder's decoder graph as an onnxruntime session, and whether the
  engine understands it;
- ``kv_cache.py``: one KV buffer per layer and kind, one row per slot, bound in place;
- ``slots.py``: which sequence has which row, and which finished rows stay for prefix reuse;
- ``sampler.py``: the next token of every row, from a step's logits;
- ``guidance.py``: constrained decoding with llguidance;
- ``ngram.py``, ``speculation.py``: n-gram drafts, which rows verify them, and taking the
  verified tokens; ``speculation_policy.py``: whether a draft pays, by what the runs cost
  here;
- ``sequence.py``: one sequence: its row, its prompt still to read, what a chosen token does;
- ``chunks.py``: reading a prompt chunk into its row, in the step or beside it;
- ``strategy.py``: the Strategy that puts them together; ``build.py``: one for a model.
"""
