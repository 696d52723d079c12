"""Code that runs on the untrusted side of the trust boundary, next to student code.

Nothing here decides a score. ``executor`` runs a submission's cells and answers the
grader's requests about them; ``zygote`` is the fork server that starts one executor
per submission inside the sandbox. Only this folder and ``wire.py`` are visible inside
the sandbox: the hidden suites, the gradebook and the results are not.
"""
