"""Starting harnesses shipped with saddler (data: copied into a run, never imported)."""
