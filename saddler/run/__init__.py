"""One optimization run: its folder, the loop and what it opens, evaluation, evolution, the end of the run."""
