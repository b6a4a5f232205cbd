"""What every door shares: answering whole or streamed, with one error policy (answer.py); the
conversions to the core's request and back, usage totals and how a choice ended (convert.py);
ids (ids.py); and the output blocks Responses and Messages both build (blocks.py)."""
