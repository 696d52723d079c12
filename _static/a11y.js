/* Formulas are out of the Tab order (_ext/a11y.py), except a displayed formula wider than its
 * column: it scrolls sideways, and a reader without a mouse must be able to reach it to scroll it
 * (WCAG 2.1.1 Keyboard). Checked again when the window changes size. */
(function () {
  "use strict";

  function reachWideFormulas() {
    for (const formula of document.querySelectorAll('mjx-container[display="true"]')) {
      if (formula.scrollWidth > formula.clientWidth + 1) formula.setAttribute("tabindex", "0");
      else formula.removeAttribute("tabindex");
    }
  }

  let started = false;
  function start() {
    const typeset = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
    if (!typeset || started) return;  // MathJax not loaded yet (see the "load" listener below), or done
    started = true;
    typeset.then(() => {
      reachWideFormulas();
      window.addEventListener("resize", reachWideFormulas);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  window.addEventListener("load", start);  // in case MathJax loads after the document
})();
