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
# Canvas names each file <student>_<user id>_<submission id>_<uploaded name>, with LATE_ after the
# student for a late one and -1, -2... before .ipynb for a resubmission; the student becomes the
# nbgrader student id. Whatever the student named the file, the grader grades the one notebook in
# submitted/<student>/<assignment>/. For another LMS, change the pattern (it is matched against the
# file's whole path): it must name the groups student_id and file_id.
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9]+)_(?:LATE_)?[0-9]+_[0-9]+_(?P<file_id>[^/]+?)(?:-[0-9]+)?\.ipynb$"
)

# nbgrader's exchange (`nbgrader release_assignment`, `collect`, the formgrader's Release and Collect
# buttons) is a folder every student account can write to, /usr/local/share/nbgrader/exchange unless
# set. This course hands out and collects through its LMS, so the exchange is a git-ignored folder of
# the course, made here: the formgrader then shows no "exchange directory does not exist" banner and
# the server logs no "Unwritable directory" line each time a page asks for the exchange. To run a
# shared exchange on a JupyterHub, point this at it instead (nbgrader's "Setting up the exchange").
c.Exchange.root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exchange")
os.makedirs(c.Exchange.root, exist_ok=True)
