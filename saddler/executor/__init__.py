"""Rollout executors: run rollouts isolated, in parallel, time-limited; local or on Ray."""
