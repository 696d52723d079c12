"""Add & Norm's autograder: hidden pytest suites graded against untrusted notebooks.

The stages, in the order data flows (one module each):

    load.py      read a submission: notebook -> the code cells to run     (trusted)
    sandbox.py   start the sandbox, one confined worker per submission    (trusted)
    run.py       run the hidden suite against the worker, score the parts (trusted)
    report.py    results JSON (Gradescope schema), grades.csv, feedback   (trusted)

The trust boundary is a folder: ``sandboxed/`` (with ``wire.py``, the format that
crosses it) is the only code that runs next to student code; everything else decides
scores and never executes student code. ``kernel.py`` runs the same suites inside an
nbgrader kernel; ``gradebook.py`` and ``gradescope.py`` connect the results to
nbgrader and to Gradescope. This file is also loaded inside the sandbox, so it imports
nothing.
"""
