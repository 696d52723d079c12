"""Command-line tools of the course: building the editions, the notebook twins, releasing exercises."""
