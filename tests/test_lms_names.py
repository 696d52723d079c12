"""The file names Canvas's and Moodle's bulk downloads give, as the course's ``zip_collect`` collector reads them.

The names follow each LMS: Canvas's *Download Submissions* (``<student>_<LATE_>?<user id>_<submission
id>_<uploaded name>``, ``-N`` before the extension for a resubmission) and Moodle's (``<Full
Name>_<participant id>_assignsubmission_file_<uploaded name>``, or that prefix as a folder, ending in
``_``, when downloaded in folders). A real ``nbgrader zip_collect`` run is in ``test_lateness.py``.
"""

from pathlib import Path

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


# ---- two students of one name, through a real `nbgrader zip_collect` ------------------------------------------

NAMESAKES = {  # the download's file name -> the submitted/ folder it must reach
    "smithjo_201_9001_ex2_layernorm.ipynb": "smithjo_201",
    "smithjo_202_9002_ex2_layernorm.ipynb": "smithjo_202",
    "Jo Smith_31_assignsubmission_file_ex2_layernorm.ipynb": "josmith_31",
    "Jo Smith_32_assignsubmission_file_ex2_layernorm.ipynb": "josmith_32",
    "lovelaceada_101_9003_ex2_layernorm.ipynb": "lovelaceada",
    "lovelaceada_101_9003_ex2_layernorm-1.ipynb": "lovelaceada",  # one student's two uploads stay together
}


@pytest.fixture(scope="module")
def namesakes(tmp_path_factory) -> Path:
    import json
    import shutil
    import zipfile

    from tests.conftest import REPO
    from tests.test_lateness import nbgrader

    course = tmp_path_factory.mktemp("namesakes")
    shutil.copy(REPO / "nbgrader_config.py", course)
    shutil.copytree(REPO / "exercises" / "ex2_layernorm", course / "exercises" / "ex2_layernorm")
    archive = course / "downloaded" / "ex2_layernorm" / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as download:
        for number, name in enumerate(NAMESAKES):
            download.writestr(name, json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
                                                "tag": number}))
    nbgrader("zip_collect", "ex2_layernorm", cwd=course)
    return course


@pytest.mark.slow
@pytest.mark.nbgrader
def test_two_students_of_one_name_are_filed_apart_under_their_lms_ids(namesakes):
    folders = sorted(p.name for p in (namesakes / "submitted").iterdir())
    assert folders == sorted(set(NAMESAKES.values()))


@pytest.mark.slow
@pytest.mark.nbgrader
def test_each_namesakes_canvas_user_id_is_kept_under_their_own_id(namesakes):
    import json

    kept = json.loads((namesakes / "downloaded" / "ex2_layernorm" / "lms.json").read_text())
    assert {student: kept[student].get("canvas_user_id") for student in ("smithjo_201", "smithjo_202")} == \
        {"smithjo_201": "201", "smithjo_202": "202"}
