/* Self-check quizzes (the {quiz} directive of _ext/quiz.py): when a reader picks an
 * answer, show whether it is right, with an icon and a word as well as a colour, and
 * the explanation of that answer. Nothing is graded, sent or stored. */
(function () {
  "use strict";

  function choose(quiz, input) {
    const index = input.value;
    const right = input.dataset.right === "true";
    for (const answer of quiz.querySelectorAll(".quiz-answer")) {
      const picked = answer.dataset.index === index;
      answer.classList.toggle("quiz-picked-right", picked && right);
      answer.classList.toggle("quiz-picked-wrong", picked && !right);
      answer.querySelector(".quiz-mark").textContent = picked ? (right ? "✓" : "✗") : "";
    }
    for (const feedback of quiz.querySelectorAll(".quiz-feedback")) {
      feedback.hidden = feedback.dataset.index !== index;
    }
  }

  function start() {
    for (const quiz of document.querySelectorAll("[data-quiz]")) {
      quiz.addEventListener("change", (event) => {
        if (event.target.matches("input[type=radio]")) choose(quiz, event.target);
      });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
