"""Code that runs on the untrusted side of the trust boundary, next to student code.

Nothing here decides a score. ``zygote`` is the fork server: it imports torch, removes
what the assignment forbids (``guard``), enters the monitor, and forks one worker per
submission, which drops its privileges, installs its ``seccomp`` filter and serves the
grader's requests with an ``executor``. ``wire`` is the format both sides speak;
``fixtures`` are the models and reference functions both sides build. Only this folder is
visible inside the sandbox: the hidden suites, the gradebook and the results are not.
"""
