"""The HTTP doors: one package per protocol (a thin router and a serving module), the plumbing
they share (http/) and what every door does alike (door/)."""
