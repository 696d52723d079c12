/* Self-check quizzes (the {quiz} directive of _ext/quiz.py). Picking an answer, with the mouse
 * or with the arrow keys, only selects it: a reader can browse the answers without seeing a
 * verdict. Check (or Enter on an answer) then shows whether the picked answer is right, with an
 * icon and a word as well as a colour, and its explanation; picking another answer hides them
 * until the next Check. Nothing is graded, sent or stored. */
(function () {
  "use strict";

  function show(quiz, index, right) {
    for (const answer of quiz.querySelectorAll(".quiz-answer")) {
      const picked = index !== null && answer.dataset.index === index;
      answer.classList.toggle("quiz-picked-right", picked && right);
      answer.classList.toggle("quiz-picked-wrong", picked && !right);
      answer.querySelector(".quiz-mark").textContent = picked ? (right ? "✓" : "✗") : "";
    }
    for (const feedback of quiz.querySelectorAll(".quiz-feedback")) {
      feedback.hidden = feedback.dataset.index !== index;
    }
  }

  function check(quiz) {
    const input = quiz.querySelector("input[type=radio]:checked");
    if (input) show(quiz, input.value, input.dataset.right === "true");
  }

  function start() {
    for (const quiz of document.querySelectorAll("[data-quiz]")) {
      const button = quiz.querySelector(".quiz-check");
      quiz.addEventListener("change", (event) => {
        if (!event.target.matches("input[type=radio]")) return;
        button.disabled = false;
        show(quiz, null, false);  // a new pick has no verdict yet
      });
      quiz.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && event.target.matches("input[type=radio]")) {
          event.preventDefault();
          check(quiz);
        }
      });
      button.addEventListener("click", () => check(quiz));
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
