"""The file names Canvas's and Moodle's bulk downloads give, as the course's ``zip_collect`` collector reads them.

The names follow each LMS: Canvas's *Download Submissions* (``<student>_<LATE_>?<user id>_<submission
id>_<uploaded name>``, ``-N`` before the extension for a resubmission) and Moodle's (``<Full
Name>_<participant id>_assignsubmission_file_<uploaded name>``, or that prefix as a folder, ending in
``_``, when downloaded in folders). A real ``nbgrader zip_collect`` run is in ``test_lateness.py``.
"""

import pytest

from autograder import collect

CANVAS = {
    # name -> (student id, late mark, user id, file)
    "lovelaceada_101_9001_ex2_layernorm.ipynb": ("lovelaceada", False, "101", "ex2_layernorm"),
    "yangcy_LATE_103_9003_ex2_layernorm.ipynb": ("yangcy", True, "103", "ex2_layernorm"),
    "okaforchi_104_9004_ex2_layernorm-2.ipynb": ("okaforchi", False, "104", "ex2_layernorm"),
    "bakerben_102_9002_my_copy_v2.ipynb": ("bakerben", False, "102", "my_copy_v2"),
}


@pytest.mark.parametrize("name", CANVAS)
def test_a_canvas_name_gives_the_student_the_late_mark_the_user_id_and_the_file(name):
    found = collect.CANVAS.search(name)
    assert (found["student_id"], bool(found["late"]), found["user_id"], found["file_id"]) == CANVAS[name]


@pytest.mark.parametrize("name", ["Ada Lovelace_1234_assignsubmission_file_ex2_layernorm.ipynb",
                                  "Ada Lovelace_1234_assignsubmission_file_/ex2_layernorm.ipynb"])
def test_a_moodle_name_gives_the_full_name_the_participant_id_and_the_file(name):
    found = collect.MOODLE.search(name)
    assert (found["name"], found["participant_id"], found["file_id"]) == ("Ada Lovelace", "1234", "ex2_layernorm")


@pytest.mark.parametrize("name", ["ex2_layernorm.ipynb", "Ada Lovelace_ex2_layernorm.ipynb"])
def test_a_name_from_neither_lms_is_not_read_as_one(name):
    assert collect.CANVAS.search(name) is None and collect.MOODLE.search(name) is None
