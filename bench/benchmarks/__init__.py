"""One module per benchmark: what ``python -m bench <command>`` runs (and
``python -m bench.benchmarks.prefix_share``)."""
