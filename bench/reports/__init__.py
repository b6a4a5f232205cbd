"""Tables and plots from a benchmark's results dict."""
