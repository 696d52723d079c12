"""nbgrader configuration of the Add & Norm course.

The assignments are authored in ``solutions/`` (nbgrader's source folder) and
released into ``exercises/``. Submissions, autograded copies, feedback and the
gradebook are created next to this file by nbgrader and are git-ignored.
"""

import os

c = get_config()  # noqa: F821 -- provided by nbgrader when it loads this file

c.CourseDirectory.course_id = "add-and-norm"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"

# Each solution notebook is generated from the MyST Markdown file beside it;
# that file holds the solutions, so it must never be copied into a release.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.md"]

# `nbgrader zip_collect <assignment>` reads the LMS's download from downloaded/<assignment>/archive/.
# The course's plugins (autograder/collect.py) read Canvas's file names,
# <student>_<LATE_>?<user id>_<submission id>_<uploaded name> (-1, -2... before .ipynb for a resubmission),
# and Moodle's, <Full Name>_<id>_assignsubmission_file_<uploaded name>; they keep each file's time in the
# zip (read in course.toml's [lateness] timezone when the zip stores no offset), so that zip_collect writes
# submitted/<student>/<assignment>/timestamp.txt, and keep the Canvas user id and Canvas's LATE mark in
# downloaded/<assignment>/lms.json for the grader. Whatever the student named the file, the grader grades
# every notebook in submitted/<student>/<assignment>/ (the best one counts). For another LMS, set
# c.FileNameCollectorPlugin.named_regexp (matched against the file's whole path; it must name the groups
# student_id and file_id): names that are neither Canvas's nor Moodle's go to it.
c.ZipCollectApp.extractor_plugin = "autograder.collect.ZipTimesExtractor"
c.ZipCollectApp.collector_plugin = "autograder.collect.LmsCollector"

# nbgrader's exchange (`nbgrader release_assignment`, `collect`, the formgrader's Release and Collect
# buttons) is a folder every student account can write to, /usr/local/share/nbgrader/exchange unless
# set. This course hands out and collects through its LMS, so the exchange is a git-ignored folder of
# the course, made here: the formgrader then shows no "exchange directory does not exist" banner and
# the server logs no "Unwritable directory" line each time a page asks for the exchange. To run a
# shared exchange on a JupyterHub, point this at it instead (nbgrader's "Setting up the exchange").
c.Exchange.root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exchange")
os.makedirs(c.Exchange.root, exist_ok=True)

# What replaces each solution in a release. nbgrader's own stub raises a NotImplementedError with no message,
# which a learner who runs a self-check before writing the task reads as an empty "NotImplementedError: ".
# The self-checks turn this error into "task N is not written yet"; the grader reports "not implemented yet".
c.ClearSolutions.code_stub = {
    "python": '# YOUR CODE HERE\nraise NotImplementedError("not written yet: replace this line with your code")',
}
