"""nbgrader configuration of the Add & Norm course.

The assignments are authored in ``solutions/`` (nbgrader's source folder) and
released into ``exercises/``. Submissions, autograded copies, feedback and the
gradebook are created next to this file by nbgrader and are git-ignored.
"""

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
