"""Bundled benchmarks: opsdesk (offline), skill-evals (evals.json), command (eval_command + metric_regex)."""
