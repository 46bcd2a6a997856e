"""Bundled benchmarks: opsdesk and repofix (offline), skill-evals, command, claude-tasks, inspect, harbor.

opsdesk and repofix are simulations built on `benchmarks.simkit` (traces, patch bank, the shared `Benchmark`
members, the runner's command line), `benchmarks.simharness` (loading a harness), `benchmarks.simwatch` (the
benchmark files harness code opens) and `benchmarks.simmodel` (what the models and tasks share); skill-evals reads
evals.json; command runs an eval command and reads a metric from its output.
"""
