"""Models: from a folder on disk to a loaded model (variants, inferred configs, providers)."""
