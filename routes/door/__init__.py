"""What every door shares: conversions to the core's request and back."""
