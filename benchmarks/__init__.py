"""Bundled benchmarks: opsdesk and repofix (offline), skill-evals, command, claude-tasks, inspect, harbor.

opsdesk and repofix are simulations built on `benchmarks.simkit`; skill-evals reads evals.json; command runs an
eval command and reads a metric from its output.
"""
