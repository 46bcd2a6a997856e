"""What a run tells people: figures, report.md, results.tsv, the progress plot, status and progress bars."""
