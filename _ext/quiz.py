"""Self-check quizzes for the book: a ``{quiz}`` directive rendered as static HTML.

One directive is one multiple-choice question. Its body is YAML::

    :::{quiz}
    question: Which axis does LayerNorm average over?
    answers:
      - text: The batch axis.
        why: That is BatchNorm ...
      - text: The features of one token.
        right: true
        why: Each token is normalized with its own mean and variance ...
    :::

``question`` and every ``why`` are MyST Markdown, every ``text`` is inline MyST. A quiz
needs at least two answers, exactly one of them right, and an explanation for each:
anything else fails the (strict) build. A reader picks an answer (with the mouse, or with
the arrow keys, which move through the answers without judging them), then presses Check (or
Enter); _static/quiz.js then shows whether it is right, with an icon and a word rather than
colour alone, and the explanation of that answer. Nothing is graded, sent or stored.

A formula in an answer is named by a plain-text form of its TeX (``spoken``), so that the
answer's accessible name keeps it: "at least √ϵ", not the "at least ϵ" that a browser makes of
MathJax's MathML.
"""

import re
from dataclasses import dataclass

import yaml
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


LETTERS = "ABCDEFGH"  # answers are labelled A., B., ...

# The words the quiz itself says, in each edition's language (the build's ``language``).
WORDS = {
    "en": {"question": "Question {number}", "right": "Right.", "wrong": "Not quite.", "check": "Check"},
    "zh": {"question": "第 {number} 题", "right": "答对了。", "wrong": "还不对。", "check": "核对答案"},
}


def words(translator) -> dict:
    # Sphinx loads the book's extensions from _ext/ as top-level modules; imported here, so that the
    # parser above also serves tools that load this file on its own (tools/sync_notebooks.py).
    from bilingual import is_chinese  # which edition this build is: one answer for every extension

    return WORDS["zh" if is_chinese(translator.builder.config) else "en"]


@dataclass(frozen=True)
class Answer:
    text: str
    why: str
    right: bool


@dataclass(frozen=True)
class Quiz:
    question: str
    answers: tuple[Answer, ...]


def parse_quiz(body: str) -> Quiz:
    """The question and answers of a ``{quiz}`` body; ValueError says what is wrong with it."""
    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError as error:
        raise ValueError(f"the quiz body is not valid YAML: {error}") from None
    if not isinstance(data, dict) or set(data) != {"question", "answers"}:
        raise ValueError("a quiz has exactly two keys, 'question' and 'answers'")
    if not isinstance(data["question"], str) or not data["question"].strip():
        raise ValueError("the question is empty")
    if not isinstance(data["answers"], list) or not 2 <= len(data["answers"]) <= len(LETTERS):
        raise ValueError(f"a quiz needs from two to {len(LETTERS)} answers")
    answers = []
    for number, item in enumerate(data["answers"], start=1):
        if not isinstance(item, dict) or not set(item) <= {"text", "why", "right"}:
            raise ValueError(f"answer {number} may only have the keys 'text', 'why' and 'right'")
        text, why, right = str(item.get("text") or "").strip(), str(item.get("why") or "").strip(), item.get("right", False)
        if not text:
            raise ValueError(f"answer {number} has no text")
        if not why:
            raise ValueError(f"answer {number} has no explanation ('why')")
        if not isinstance(right, bool):
            raise ValueError(f"answer {number}: 'right' must be true or false")
        answers.append(Answer(text, why, right))
    if sum(answer.right for answer in answers) != 1:
        raise ValueError("a quiz needs exactly one right answer")
    return Quiz(data["question"].strip(), tuple(answers))


# ---- formulas as plain text, for the accessible name of an answer ---------------------------

SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ϵ", "varepsilon": "ε", "eta": "η",
    "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ",
    "omega": "ω", "Sigma": "Σ", "Delta": "Δ", "cdot": "·", "times": "×", "leftarrow": "←", "rightarrow": "→",
    "to": "→", "leq": "≤", "geq": "≥", "le": "≤", "ge": "≥", "neq": "≠", "approx": "≈", "infty": "∞",
    "lVert": "‖", "rVert": "‖", "Vert": "‖", "lvert": "|", "rvert": "|", "sum": "∑", "partial": "∂",
    "nabla": "∇", "in": "∈", "odot": "⊙", "ldots": "…", "dots": "…", "quad": " ", "qquad": " ",
    ",": " ", ";": " ", "!": "", " ": " ", "{": "{", "}": "}", "left": "", "right": "", "big": "", "Big": "",
}
STYLES = {"mathbb": {"E": "𝔼", "R": "ℝ"}}
ACCENTS = {"hat": "\u0302", "bar": "\u0304", "tilde": "\u0303", "vec": "\u20d7"}
SUPERSCRIPTS = dict(zip("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ"))
SUBSCRIPTS = dict(zip("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎"))
TOKEN = re.compile(r"\\([A-Za-z]+|.)|([{}^_])|(\s+)|(.)", re.S)


def spoken(tex: str) -> str:
    """A plain-text form of an inline TeX formula: ``\\sqrt{\\epsilon}`` -> "√ϵ", ``x^2`` -> "x²".

    Enough for the formulas of the quizzes (Greek letters, roots, fractions, norms, accents,
    scripts, ``\\mathrm``); an unknown command keeps its name without the backslash.
    """
    tokens = list(TOKEN.finditer(tex))
    position = 0

    def group() -> str:  # one argument: {...} or a single token
        nonlocal position
        while position < len(tokens) and tokens[position].group(3):  # "\\sqrt x", "x^ 2"
            position += 1
        if position < len(tokens) and tokens[position].group(2) == "{":
            position += 1
            return sequence(until="}")
        return atom()

    def atom() -> str:
        nonlocal position
        if position >= len(tokens):
            return ""
        token = tokens[position]
        position += 1
        command, brace, space, char = token.groups()
        if brace == "{":
            return sequence(until="}")
        if brace is not None:  # a stray "}" or a script without a base
            return ""
        if space is not None:
            return " "
        if char is not None:
            return char
        if command == "sqrt":
            return "√" + bracket(group())
        if command in ("frac", "dfrac", "tfrac"):
            top, bottom = group(), group()
            return f"{bracket(top)}/{bracket(bottom)}"
        if command in STYLES:
            inner = group()
            return "".join(STYLES[command].get(letter, letter) for letter in inner)
        if command in ("mathrm", "mathbf", "mathit", "text", "operatorname", "mathcal", "boldsymbol"):
            return group()
        if command in ACCENTS:
            return group() + ACCENTS[command]
        return SYMBOLS.get(command, command)

    def bracket(text: str) -> str:  # "√ϵ" but "√(σ² + ϵ)"
        return text if len(text) == 1 else f"({text})"

    def script(text: str, table: dict, mark: str) -> str:  # x² where Unicode has the digits, else x^(...)
        if text and all(ch in table for ch in text):
            return "".join(table[ch] for ch in text)
        return mark + bracket(text)

    def sequence(until=None) -> str:
        nonlocal position
        out = ""
        while position < len(tokens):
            token = tokens[position]
            if until and token.group(2) == until:
                position += 1
                return out
            if token.group(2) in ("^", "_"):
                position += 1
                argument = group()
                if token.group(2) == "^":
                    out += script(argument, SUPERSCRIPTS, "^")
                else:
                    out += script(argument, SUBSCRIPTS, "_")
                continue
            out += atom()
        return out

    return re.sub(r"\s+", " ", sequence()).strip()


# ---- doctree nodes, rendered as HTML by the visitors below -----------------------------------


class quiz(nodes.General, nodes.Element):
    """One question: attributes ``ids`` and ``number``."""


class quiz_question(nodes.General, nodes.Element):
    """The question's text."""


class quiz_answers(nodes.General, nodes.Element):
    """The group of answers."""


class quiz_answer(nodes.General, nodes.Element):
    """One answer's label: attributes ``quiz_id``, ``index``, ``right``."""


class quiz_math(nodes.General, nodes.Element):
    """A formula in an answer, named by its plain-text form: attribute ``spoken``."""


class quiz_feedbacks(nodes.General, nodes.Element):
    """The live region that holds the feedback of every answer."""


class quiz_feedback(nodes.General, nodes.Element):
    """The verdict and explanation of one answer, hidden until it is picked."""


class QuizDirective(SphinxDirective):
    has_content = True

    def run(self):
        try:
            parsed = parse_quiz("\n".join(self.content))
        except ValueError as error:
            raise self.error(f"{{quiz}}: {error}") from None
        number = self.env.new_serialno("quiz") + 1
        quiz_id = f"quiz-{number}"
        node = quiz(ids=[quiz_id], number=number)
        self.set_source_info(node)

        question = quiz_question(ids=[f"{quiz_id}-question"])
        self.state.nested_parse(StringList(parsed.question.splitlines()), self.content_offset, question)
        node += question

        answers = quiz_answers(labelledby=f"{quiz_id}-question")
        for index, answer in enumerate(parsed.answers):
            label = quiz_answer(quiz_id=quiz_id, index=index, right=answer.right, letter=LETTERS[index])
            inline, messages = self.state.inline_text(answer.text, self.lineno)
            label.extend(inline)
            label.extend(messages)
            for formula in list(label.findall(nodes.math)):
                named = quiz_math(spoken=spoken(formula.astext()))
                formula.replace_self(named)
                named += formula
            answers += label
        node += answers

        feedbacks = quiz_feedbacks()
        for index, answer in enumerate(parsed.answers):
            feedback = quiz_feedback(index=index, right=answer.right)
            self.state.nested_parse(StringList(answer.why.splitlines()), self.content_offset, feedback)
            feedbacks += feedback
        node += feedbacks
        return [node]


def visit_quiz(self, node):
    self.body.append(
        f'<div class="quiz" id="{node["ids"][0]}" data-quiz>'
        f'<p class="quiz-number">{words(self)["question"].format(number=node["number"])}</p>'
    )


def depart_quiz(self, node):
    self.body.append("</div>\n")


def visit_quiz_question(self, node):
    self.body.append(f'<div class="quiz-question" id="{node["ids"][0]}">')


def depart_quiz_question(self, node):
    self.body.append("</div>")


def visit_quiz_answers(self, node):
    self.body.append(f'<fieldset class="quiz-answers" aria-labelledby="{node["labelledby"]}">')


def depart_quiz_answers(self, node):
    # Disabled until an answer is picked: checking nothing has nothing to show.
    self.body.append(f'</fieldset><button type="button" class="quiz-check" disabled>{words(self)["check"]}</button>')


def visit_quiz_math(self, node):
    # role="img": the name is the plain-text form, and MathJax's output inside is one picture.
    self.body.append(f'<span class="quiz-math" role="img" aria-label="{self.attval(node["spoken"])}">')


def depart_quiz_math(self, node):
    self.body.append("</span>")


def visit_quiz_answer(self, node):
    answer_id = f'{node["quiz_id"]}-{node["index"]}'
    self.body.append(
        f'<div class="quiz-answer" data-index="{node["index"]}">'
        f'<input type="radio" name="{node["quiz_id"]}" id="{answer_id}" value="{node["index"]}"'
        f' data-right="{str(node["right"]).lower()}">'
        f'<label for="{answer_id}"><span class="quiz-letter">{node["letter"]}.</span> '
    )


def depart_quiz_answer(self, node):
    self.body.append('</label><span class="quiz-mark" aria-hidden="true"></span></div>')


def visit_quiz_feedbacks(self, node):
    self.body.append('<div class="quiz-feedbacks" aria-live="polite">')


def depart_quiz_feedbacks(self, node):
    self.body.append("</div>")


def visit_quiz_feedback(self, node):
    said = words(self)
    verdict = ("quiz-right", "✓", said["right"]) if node["right"] else ("quiz-wrong", "✗", said["wrong"])
    self.body.append(
        f'<div class="quiz-feedback {verdict[0]}" data-index="{node["index"]}" hidden>'
        f'<p class="quiz-verdict"><span class="quiz-icon" aria-hidden="true">{verdict[1]}</span> {verdict[2]}</p>'
    )


def depart_quiz_feedback(self, node):
    self.body.append("</div>")


def skip(self, node):
    """Formats without JavaScript (LaTeX, text, ...) leave the quizzes out."""
    raise nodes.SkipNode


def setup(app):
    for node, visit, depart in [
        (quiz, visit_quiz, depart_quiz),
        (quiz_question, visit_quiz_question, depart_quiz_question),
        (quiz_answers, visit_quiz_answers, depart_quiz_answers),
        (quiz_answer, visit_quiz_answer, depart_quiz_answer),
        (quiz_math, visit_quiz_math, depart_quiz_math),
        (quiz_feedbacks, visit_quiz_feedbacks, depart_quiz_feedbacks),
        (quiz_feedback, visit_quiz_feedback, depart_quiz_feedback),
    ]:
        others = {fmt: (skip, None) for fmt in ("latex", "text", "man", "texinfo")} if node is quiz else {}
        app.add_node(node, html=(visit, depart), **others)
    app.add_directive("quiz", QuizDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
