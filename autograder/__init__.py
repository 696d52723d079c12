"""Add & Norm's autograder: hidden pytest suites graded against untrusted notebooks.

The stages, in the order data flows (one module each):

    load.py      read a submission: notebook -> the code cells to run, scanned (scan.py)  (trusted)
    sandbox.py   start the sandbox; carry requests to one confined worker per submission   (trusted)
                 (its zygote started by launch.py, standard library only, before PyTorch is imported)
    run.py       run the hidden suite against the worker, decide each verdict              (trusted)
    report.py    results JSON (Gradescope schema), grades.csv, feedback                    (trusted)

``scoring.py`` runs a suite against a ``Submission`` (``checks.py``) and scores its parts,
knowing nothing of transport; ``cli.py`` reads the command line; ``gradebook.py``,
``gradescope.py`` and ``lms.py`` connect the results to nbgrader, to Gradescope and to a
Canvas or Moodle gradebook (a CSV export); ``kernel.py`` runs the
same suites inside an nbgrader kernel, the one place where both sides share a process.

The trust boundary is a folder: ``sandboxed/`` is all that is bound into the sandbox and
all that runs next to student code. The trusted modules import from it only the wire
format (``sandboxed/wire.py``, framing included) and the fixtures both sides build;
``tests/test_autograder_layering.py`` keeps it that way.
"""
