"""The tokenizer routes: /tokenize, /detokenize, /apply-template."""
