"""``teeboost bench``: protocols side by side over sample sizes, resumable, with a report."""
