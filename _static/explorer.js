/* The Add & Norm explorer of chapter 2, as static HTML: no kernel, no network.
 *
 * addAndNormStages is a line-by-line port of add_and_norm_stages in
 * chapters/addnorm_helpers.py, the one definition of the math; tests/test_browser.py
 * checks the numbers this page shows against it and against torch's layer_norm.
 * The chapter's code writes the starting vectors, eps, the x10 factor and the palette
 * into the placeholder's data- attributes (addnorm_helpers.explorer_html).
 *
 * For tests and curious readers: ?x=1,2,3,4,5&fx=0.1,0.2,0.3,0.4,0.5 in the address
 * sets the vectors, and window.addNormExplorer has set(x, fx), state() and reset()
 * (back to the starting vectors and the default controls).
 */
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 220, HEIGHT = 128, TOP = 16, BOTTOM = 112; // chart geometry, in SVG units
  const LEFT = 6, RIGHT = 16; // margins; the right one holds the label of the mean line

  // ---- the math: add_and_norm_stages, ported ------------------------------------------
  const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
  const dot = (a, b) => a.reduce((s, ai, i) => s + ai * b[i], 0);
  const norm = (v) => Math.sqrt(dot(v, v));

  function addAndNormStages(x, fx, { gamma = 1, beta = 0, eps = 1e-5, factor = 10, unstable = false, residual = true } = {}) {
    const identity = x.map((v) => (residual ? v : 0));
    const transformed = fx.map((v) => (unstable ? factor * v : v));
    const summed = identity.map((v, i) => v + transformed[i]); // Add
    const mu = mean(summed);
    const variance = mean(summed.map((v) => (v - mu) ** 2)); // biased: divides by C
    const denominator = Math.sqrt(variance + eps); // eps inside the square root
    const xHat = summed.map((v) => (v - mu) / denominator); // Norm
    const y = xHat.map((v) => gamma * v + beta); // scale and shift
    const xMean = mean(x);
    const xSpread = Math.sqrt(mean(x.map((v) => (v - xMean) ** 2)) + eps);
    const xAlone = x.map((v) => (v - xMean) / xSpread); // LayerNorm(x)
    const lengths = norm(xHat) * norm(xAlone);
    const identityCosine = lengths > 0 ? dot(xHat, xAlone) / lengths : NaN;
    return { identity, transformed, summed, mu, sigma: Math.sqrt(variance), denominator, xHat, y, identityCosine };
  }

  // ---- small DOM helpers -----------------------------------------------------------------
  function el(tag, attrs = {}, children = []) {
    const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child);
    return node;
  }

  const fmt = (v, digits) => {
    const text = v.toFixed(digits);
    return /^-0\.?0*$/.test(text) ? text.slice(1) : text; // no "-0.00"
  };
  const parseNumbers = (text) => (text || "").split(",").map((s) => Number(s.trim()));
  const isVector = (v, length) => Array.isArray(v) && v.length === length && v.every(Number.isFinite);
  // ---- the words it shows, in the page's language (<html lang>: the English or the Chinese edition) ----
  const WORDS = {
    en: {
      region: "Add & Norm explorer",
      controls: "Explorer controls",
      newVector: "New random vector",
      gamma: "γ (gamma), scale",
      beta: "β (beta), shift",
      instabilityOn: (k) => `⚠ Instability on: F(x) × ${k} (press to undo)`,
      instabilityOff: (k) => `Inject instability: F(x) × ${k}`,
      residualOn: "Residual connection: on",
      residualOff: "Residual connection: off (identity path = 0)",
      statusUnstable: (k) => `F(x) is multiplied by ${k}.`,
      statusStable: "F(x) as the sublayer returned it.",
      statusResidual: "Residual connection on.",
      statusNoResidual: "Residual connection off: the identity path carries zeros.",
      stageA: "A. Split and add: the identity path plus the transformation path",
      stageB: "B. Norm: LayerNorm of the sum, in three steps",
      stats: "B1. Statistics: the mean μ (dashed line) and μ ± σ (band)",
      identity: "Identity path (the shortcut): x",
      identityCut: "Identity path: cut, 0",
      transformed: (fx) => `Transformation path, Attention / FFN: ${fx}`,
      summed: "Add: ",
      normalize: "B2. Normalize: ",
      scaleShift: "B3. Scale and shift: ",
      identityBars: "identity path",
      transformedBars: (fx) => `transformation path ${fx}`,
      sumBars: "sum",
      statsBars: "sum, with its mean and a band of one standard deviation",
      xHatBars: "normalized x̂",
      yBars: "output y",
      biased: (n) => ` (biased: the mean of the squared deviations over the ${n} features)`,
      cosine: "How much of x is left in x̂: cosine with LayerNorm(x) = ",
      cosineMeaning: " (1: x̂ points along x; near 0: x is drowned).",
      undefinedCosine: "undefined",
      legend: "Dashed outlines in B2: x̂ with F(x) × 1 and the residual on, for comparison.",
      badAddress: (x, fx, n) => `The address asks for x=${x} and fx=${fx}; ` +
        `the explorer needs ${n} numbers each, so it shows its own vectors.`,
      plus: "plus", equals: "equals", then: "then",
      gap: " ",  // between two sentences
      // What the one live region says after a reader's change: the change, then its result.
      changedScale: (g, b) => `γ = ${g}, β = ${b}:`,
      changedVectors: "New random vectors.",
      result: (y, cosine) => `y = ${y}; cosine with LayerNorm(x) = ${cosine}.`,
    },
    zh: {
      region: "Add & Norm 交互演示",
      controls: "交互演示的控件",
      newVector: "换一个随机向量",
      gamma: "γ（gamma），缩放",
      beta: "β（beta），平移",
      instabilityOn: (k) => `⚠ 已注入不稳定：F(x) × ${k}（再按一次撤销）`,
      instabilityOff: (k) => `注入不稳定：F(x) × ${k}`,
      residualOn: "残差连接：开",
      residualOff: "残差连接：关（恒等路径 = 0）",
      statusUnstable: (k) => `F(x) 乘以 ${k}。`,
      statusStable: "F(x) 保持子层的原始输出。",
      statusResidual: "残差连接已打开。",
      statusNoResidual: "残差连接已关闭：恒等路径传的全是 0。",
      stageA: "A. 分流再相加：恒等路径加上变换路径",
      stageB: "B. 归一化：对和做层归一化，分三步",
      stats: "B1. 统计量：均值 μ（虚线）与 μ ± σ（色带）",
      identity: "恒等路径（捷径）：x",
      identityCut: "恒等路径：已切断，0",
      transformed: (fx) => `变换路径（注意力 / FFN）：${fx}`,
      summed: "相加：",
      normalize: "B2. 归一化：",
      scaleShift: "B3. 缩放与平移：",
      identityBars: "恒等路径",
      transformedBars: (fx) => `变换路径 ${fx}`,
      sumBars: "和",
      statsBars: "和，及其均值与一个标准差宽的色带",
      xHatBars: "归一化后的 x̂",
      yBars: "输出 y",
      biased: (n) => `（有偏：${n} 个特征上偏差平方的平均）`,
      cosine: "x̂ 中还剩多少 x：与 LayerNorm(x) 的余弦相似度 = ",
      cosineMeaning: "（1：x̂ 与 x 同向；接近 0：x 被淹没）。",
      undefinedCosine: "无定义",
      legend: "B2 中的虚线框：F(x) × 1 且残差连接打开时的 x̂，用作对照。",
      badAddress: (x, fx, n) => `地址中给出的是 x=${x} 和 fx=${fx}；` +
        `交互演示每个向量需要 ${n} 个数，因此显示它自己的向量。`,
      plus: "加", equals: "等于", then: "然后",
      gap: "",
      changedScale: (g, b) => `γ = ${g}，β = ${b}：`,
      changedVectors: "换了一组随机向量。",
      result: (y, cosine) => `y = ${y}；与 LayerNorm(x) 的余弦相似度 = ${cosine}。`,
    },
  };
  const T = WORDS[(document.documentElement.lang || "en").toLowerCase().startsWith("zh") ? "zh" : "en"];

  const randomToken = (n) => Array.from({ length: n }, () => Math.round((2 * Math.random() - 1) * 100) / 100);

  let explorerCount = 0;

  // ---- one bar chart -----------------------------------------------------------------------
  // A <figure> with a caption and an SVG: one bar per feature, each labelled with its value.
  class BarChart {
    constructor(name, caption, kind) {
      this.kind = kind;
      this.captionText = el("span", { text: caption });
      this.svg = el("svg:svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", class: "ane-svg" });
      this.figure = el("figure", { class: `ane-chart ane-${kind}`, "data-chart": name }, [
        el("figcaption", {}, [this.captionText]),
        this.svg,
      ]);
    }

    y(value) {
      return (TOP + BOTTOM) / 2 - (value / this.range) * (BOTTOM - TOP) / 2;
    }

    draw(values, range, { fill, label, band = null, line = null, ghosts = null }) {
      this.range = range;
      const n = values.length, slot = (WIDTH - LEFT - RIGHT) / n, barWidth = slot * 0.62;
      const left = (i, width) => LEFT + slot * i + (slot - width) / 2;
      const parts = [];
      if (band) {
        const [low, high] = band;
        parts.push(el("svg:rect", {
          class: "ane-band", x: LEFT, width: WIDTH - LEFT - RIGHT, y: this.y(high),
          height: Math.max(0, this.y(low) - this.y(high)),
        }));
      }
      parts.push(el("svg:line", { class: "ane-zero", x1: LEFT, x2: WIDTH - RIGHT, y1: this.y(0), y2: this.y(0) }));
      const labels = []; // drawn last, over lines and outlines
      values.forEach((v, i) => {
        const x = left(i, barWidth);
        const top = Math.min(this.y(v), this.y(0));
        const height = Math.max(Math.abs(this.y(v) - this.y(0)), 0.5);
        parts.push(el("svg:rect", {
          class: "ane-bar", x, width: barWidth, y: top, height, fill, "data-index": i, "data-value": v,
        }));
        const below = v < 0;
        labels.push(el("svg:text", {
          class: "ane-value", x: x + barWidth / 2, y: below ? top + height + 11 : top - 3,
          "text-anchor": "middle", "data-index": i, text: fmt(v, 2),
        }));
      });
      if (line) {
        const y = this.y(line.value);
        parts.push(el("svg:line", { class: "ane-mean", x1: LEFT, x2: WIDTH - RIGHT + 2, y1: y, y2: y }));
        parts.push(el("svg:text", { class: "ane-mean-label", x: WIDTH - RIGHT + 4, y: y + 4, text: line.label }));
      }
      if (ghosts) { // dashed outlines of other bars, drawn on top so that none is hidden
        const ghostWidth = slot * 0.82;
        ghosts.forEach((v, i) => {
          parts.push(el("svg:rect", {
            class: "ane-ghost", x: left(i, ghostWidth), width: ghostWidth, y: Math.min(this.y(v), this.y(0)),
            height: Math.abs(this.y(v) - this.y(0)), "data-index": i, "data-value": v,
          }));
        });
      }
      this.svg.replaceChildren(...parts, ...labels);
      this.svg.setAttribute("aria-label", `${label}: ${values.map((v) => fmt(v, 2)).join(", ")}`);
    }
  }

  // ---- the explorer ------------------------------------------------------------------------
  class Explorer {
    constructor(root) {
      this.root = root;
      this.id = `ane-${++explorerCount}`;
      this.eps = Number(root.dataset.eps);
      this.factor = Number(root.dataset.factor);
      this.palette = JSON.parse(root.dataset.palette);
      this.x = parseNumbers(root.dataset.x);
      this.fx = parseNumbers(root.dataset.fx);
      this.gamma = 1;
      this.beta = 0;
      this.unstable = false;
      this.residual = true;
      this.build();
      this.readAddress();
      this.start = { x: [...this.x], fx: [...this.fx] };
      this.update();
    }

    build() {
      const root = this.root, id = this.id, p = this.palette;
      for (const [name, colour] of Object.entries(p)) root.style.setProperty(`--ane-${name}`, colour);
      root.querySelector(".ane-fallback")?.remove();
      root.classList.add("ane-ready");
      root.setAttribute("role", "region");
      root.setAttribute("aria-label", T.region);

      // Patterns, so that no bar is told apart by its colour alone.
      const pattern = (name, colour, rotate, mark) => el("svg:pattern", {
        id: `${id}-${name}`, patternUnits: "userSpaceOnUse", width: 6, height: 6, patternTransform: `rotate(${rotate})`,
      }, [el("svg:rect", { width: 6, height: 6, fill: colour }), mark]);
      const stripe = () => el("svg:line", { x1: 1, y1: 0, x2: 1, y2: 6, stroke: "#000", "stroke-opacity": 0.55, "stroke-width": 1.5 });
      const dotMark = () => el("svg:circle", { cx: 3, cy: 3, r: 1.1, fill: "#000", "fill-opacity": 0.55 });
      const cross = () => el("svg:path", { d: "M 0 3 H 6 M 3 0 V 6", stroke: "#000", "stroke-opacity": 0.6, "stroke-width": 1.2 });
      const defs = el("svg:svg", { class: "ane-defs", "aria-hidden": "true", width: 0, height: 0 }, [el("svg:defs", {}, [
        pattern("hatch", p.orange, 45, stripe()),
        pattern("dots", p.sky, 0, dotMark()),
        pattern("cross", p.vermillion, 45, cross()),
        pattern("stripes", p.purple, 90, stripe()),
      ])]);
      this.fills = {
        identity: p.blue, transformed: `url(#${id}-hatch)`, stable: `url(#${id}-dots)`,
        unstable: `url(#${id}-cross)`, xHat: p.green, y: `url(#${id}-stripes)`,
      };

      // Controls: two toggle buttons, a button, two labelled sliders.
      this.instabilityButton = el("button", { type: "button", class: "ane-button ane-instability", "aria-pressed": "false" });
      this.residualButton = el("button", { type: "button", class: "ane-button ane-residual", "aria-pressed": "true" });
      this.newButton = el("button", { type: "button", class: "ane-button ane-new", text: T.newVector });
      const slider = (name, label, min, max, value) => {
        const input = el("input", { type: "range", id: `${id}-${name}`, min, max, step: 0.1, value, class: `ane-${name}` });
        // An <output> is a live region of its own: off, the announcement says the value.
        const output = el("output", { for: `${id}-${name}`, class: `ane-${name}-value`, "aria-live": "off", text: value.toFixed(1) });
        return [el("div", { class: "ane-slider" }, [el("label", { for: `${id}-${name}`, text: label }), input, output]), input, output];
      };
      let gammaBox, betaBox;
      [gammaBox, this.gammaInput, this.gammaOutput] = slider("gamma", T.gamma, 0.1, 3.0, 1.0);
      [betaBox, this.betaInput, this.betaOutput] = slider("beta", T.beta, -2.0, 2.0, 0.0);

      // Each change of a control is announced once, in one sentence (see announce).
      this.instabilityButton.addEventListener("click", () => { this.unstable = !this.unstable; this.update("status"); });
      this.residualButton.addEventListener("click", () => { this.residual = !this.residual; this.update("status"); });
      this.newButton.addEventListener("click", () => {
        this.x = randomToken(this.x.length);
        this.fx = randomToken(this.fx.length);
        this.update("vectors");
      });
      this.gammaInput.addEventListener("input", () => { this.gamma = Number(this.gammaInput.value); this.update("scale"); });
      this.betaInput.addEventListener("input", () => { this.beta = Number(this.betaInput.value); this.update("scale"); });

      // Stage A: x + F(x) = sum. Stage B: statistics, normalize, scale and shift.
      this.charts = {
        identity: new BarChart("identity", "", "identity"),
        transformed: new BarChart("transformed", "", "transformed"),
        summed: new BarChart("summed", "", "summed"),
        stats: new BarChart("stats", T.stats, "stats"),
        xHat: new BarChart("x-hat", "", "x-hat"),
        y: new BarChart("y", "", "y"),
      };
      const c = this.charts;
      const op = (symbol, name) => el("div", { class: "ane-op", "aria-hidden": "true", title: name, text: symbol });
      this.statsLine = el("p", { class: "ane-stats-line" });
      this.cosineLine = el("p", { class: "ane-cosine-line" });
      this.legend = el("p", { class: "ane-legend" });
      this.status = el("p", { class: "ane-status" });
      // The one live region: a screen reader hears one sentence per change, not every line that moved.
      this.announcer = el("p", { class: "ane-announcer addnorm-sr-only", role: "status" });
      this.message = el("p", { class: "ane-message", hidden: "" });

      root.append(
        defs,
        el("div", { class: "ane-controls", role: "group", "aria-label": T.controls }, [
          el("div", { class: "ane-buttons" }, [this.instabilityButton, this.residualButton, this.newButton]),
          el("div", { class: "ane-sliders" }, [gammaBox, betaBox]),
        ]),
        this.status,
        this.announcer,
        this.message,
        el("section", { class: "ane-stage", "aria-labelledby": `${id}-a` }, [
          el("h3", { id: `${id}-a`, class: "ane-stage-title", text: T.stageA }),
          el("div", { class: "ane-row" }, [c.identity.figure, op("+", T.plus), c.transformed.figure, op("=", T.equals), c.summed.figure]),
        ]),
        el("section", { class: "ane-stage", "aria-labelledby": `${id}-b` }, [
          el("h3", { id: `${id}-b`, class: "ane-stage-title", text: T.stageB }),
          el("div", { class: "ane-row" }, [c.stats.figure, op("→", T.then), c.xHat.figure, op("→", T.then), c.y.figure]),
          this.statsLine,
          this.cosineLine,
          this.legend,
        ]),
      );
    }

    readAddress() {
      const params = new URLSearchParams(window.location.search);
      if (!params.has("x") && !params.has("fx")) return;
      const x = params.has("x") ? parseNumbers(params.get("x")) : this.x;
      const fx = params.has("fx") ? parseNumbers(params.get("fx")) : this.fx;
      if (isVector(x, this.x.length) && isVector(fx, this.fx.length)) {
        this.x = x;
        this.fx = fx;
      } else {
        this.message.hidden = false;
        this.message.textContent = T.badAddress(params.get("x"), params.get("fx"), this.x.length);
      }
    }

    stages(overrides = {}) {
      return addAndNormStages(this.x, this.fx, {
        gamma: this.gamma, beta: this.beta, eps: this.eps, factor: this.factor,
        unstable: this.unstable, residual: this.residual, ...overrides,
      });
    }

    update(change = null) {
      const s = this.stages();
      const c = this.charts, f = this.fills, k = this.factor;
      const fx = this.unstable ? `${k} F(x)` : "F(x)";

      this.instabilityButton.setAttribute("aria-pressed", String(this.unstable));
      this.instabilityButton.textContent = this.unstable ? T.instabilityOn(k) : T.instabilityOff(k);
      this.residualButton.setAttribute("aria-pressed", String(this.residual));
      this.residualButton.textContent = this.residual ? T.residualOn : T.residualOff;
      this.gammaOutput.textContent = this.gamma.toFixed(1);
      this.betaOutput.textContent = this.beta.toFixed(1);
      this.root.classList.toggle("ane-unstable", this.unstable);
      this.root.classList.toggle("ane-no-residual", !this.residual);
      this.status.textContent = [
        this.unstable ? T.statusUnstable(k) : T.statusStable,
        this.residual ? T.statusResidual : T.statusNoResidual,
      ].join(T.gap);

      c.identity.captionText.textContent = this.residual ? T.identity : T.identityCut;
      c.transformed.captionText.textContent = T.transformed(fx);
      c.summed.captionText.textContent = `${T.summed}${this.residual ? "x + " : ""}${fx}${this.unstable ? " ⚠" : ""}`;
      c.xHat.captionText.textContent = `${T.normalize}x̂ = (v − μ) / √(σ² + ε), √(σ² + ε) = ${fmt(s.denominator, 3)}`;
      c.y.captionText.textContent = `${T.scaleShift}y = γ·x̂ + β, γ = ${this.gamma.toFixed(1)}, β = ${this.beta.toFixed(1)}`;

      const addRange = Math.max(1, ...[s.identity, s.transformed, s.summed].flat().map(Math.abs));
      const normRange = Math.max(2.5, ...[s.xHat, s.y].flat().map(Math.abs));
      const sumFill = this.unstable ? f.unstable : f.stable;
      c.identity.draw(s.identity, addRange, { fill: f.identity, label: T.identityBars });
      c.transformed.draw(s.transformed, addRange, { fill: f.transformed, label: T.transformedBars(fx) });
      c.summed.draw(s.summed, addRange, { fill: sumFill, label: T.sumBars });
      c.stats.draw(s.summed, addRange, {
        fill: sumFill, label: T.statsBars,
        band: [s.mu - s.sigma, s.mu + s.sigma], line: { value: s.mu, label: "μ" },
      });
      // Dashed outlines show x̂ of the plain block (F(x) x 1, residual on) whenever a button moved away from it.
      const changed = this.unstable || !this.residual;
      const reference = changed ? this.stages({ unstable: false, residual: true }).xHat : null;
      c.xHat.draw(s.xHat, normRange, { fill: f.xHat, label: T.xHatBars, ghosts: reference });
      c.y.draw(s.y, normRange, { fill: f.y, label: T.yBars });

      this.statsLine.replaceChildren(
        "μ = ", el("span", { "data-stat": "mu", text: fmt(s.mu, 3) }),
        ", σ = ", el("span", { "data-stat": "sigma", text: fmt(s.sigma, 3) }),
        T.biased(s.summed.length),
      );
      const cosine = Number.isNaN(s.identityCosine) ? T.undefinedCosine : fmt(s.identityCosine, 3);
      this.cosineLine.replaceChildren(
        T.cosine,
        el("span", { "data-stat": "identity-cosine", text: cosine }),
        T.cosineMeaning,
      );
      this.legend.textContent = changed
        ? T.legend
        : "";
      this.legend.hidden = !changed;
      if (change) this.announce(change, s, cosine);
    }

    announce(change, s, cosine) {
      const k = this.factor;
      const what = {
        status: [this.unstable ? T.statusUnstable(k) : T.statusStable, this.residual ? T.statusResidual : T.statusNoResidual].join(T.gap),
        scale: T.changedScale(this.gamma.toFixed(1), this.beta.toFixed(1)),
        vectors: T.changedVectors,
      }[change];
      const space = what.endsWith("：") || what.endsWith("。") ? "" : " ";
      this.announcer.textContent = what + space + T.result(s.y.map((v) => fmt(v, 2)).join(", "), cosine);
    }

    state() {
      return {
        x: [...this.x], fx: [...this.fx], gamma: this.gamma, beta: this.beta,
        unstable: this.unstable, residual: this.residual, stages: this.stages(),
      };
    }

    reset() {
      this.x = [...this.start.x];
      this.fx = [...this.start.fx];
      this.gamma = 1;
      this.beta = 0;
      this.gammaInput.value = "1";
      this.betaInput.value = "0";
      this.unstable = false;
      this.residual = true;
      this.update();
      return this.state();
    }

    set(x, fx) {
      if (!isVector(x, this.x.length) || !isVector(fx, this.fx.length)) {
        throw new Error(`set(x, fx) needs two arrays of ${this.x.length} finite numbers`);
      }
      this.x = [...x];
      this.fx = [...fx];
      this.update();
      return this.state();
    }
  }

  function start() {
    const explorers = [...document.querySelectorAll(".addnorm-explorer")].map((root) => new Explorer(root));
    if (explorers.length) {
      const first = explorers[0];
      window.addNormExplorer = {
        addAndNormStages,
        set: (x, fx) => first.set(x, fx),
        state: () => first.state(),
        reset: () => first.reset(),
      };
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
