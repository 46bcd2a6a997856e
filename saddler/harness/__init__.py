"""The harness as a git space: the run's clone, worktrees and commits, the component map, structure rules, export.

Every git call goes through `saddler.harness.gitcmd`.
"""
