"""EvoDAG: the SQLite store of an optimization's candidates, edges, rollouts, lessons and sessions.

`evodag` knows nothing of `saddler`: it stores and queries; it never decides.
"""

from evodag.models import Edge, Event, Iteration, Lesson, Node, RolloutRow, Run, SessionRow

__all__ = ["Edge", "Event", "Iteration", "Lesson", "Node", "RolloutRow", "Run", "SessionRow"]
