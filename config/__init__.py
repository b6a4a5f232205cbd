"""Configuration: the settings, the command line derived from them, and the models file."""
