(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("review-data").textContent);
  const views = {};
  const players = [];
  let active = null;
  const fmt = new Intl.NumberFormat("en-US");

  function Player(root, spec) {
    this.root = root; this.frames = spec.frames; this.chart = spec.chart; this.index = 0; this.timer = null;
    this.counter = root.querySelector(".counter"); this.story = root.querySelector("ol.story");
    this.states = root.querySelector(".states"); this.slider = root.querySelector("input[type=range]");
    this.playButton = root.querySelector("[data-action=play]");
    const self = this;
    root.querySelector("[data-action=step]").addEventListener("click", function () { self.pause(); self.go(self.index + 1); });
    root.querySelector("[data-action=back]").addEventListener("click", function () { self.pause(); self.go(self.index - 1); });
    this.playButton.addEventListener("click", function () { self.timer ? self.pause() : self.play(); });
    this.slider.addEventListener("input", function () { self.pause(); self.go(Number(self.slider.value)); });
    root.addEventListener("pointerdown", function () { activate(self); });
    root.addEventListener("focusin", function () { activate(self); });
    this.go(0);
  }
  Player.prototype.go = function (index) {
    if (!this.frames.length) { this.counter.textContent = "no frames"; return; }
    this.index = Math.max(0, Math.min(this.frames.length - 1, index));
    const frame = this.frames[this.index];
    this.root.dataset.frame = String(this.index);
    this.root.dataset.step = String(frame.step);
    this.root.dataset.timeMs = String(frame.time_ms);
    this.counter.textContent = "frame " + (this.index + 1) + " of " + this.frames.length +
      " · step " + frame.step + " · " + fmt.format(frame.time_ms) + " ms";
    this.slider.value = String(this.index);
    this.states.textContent = frame.states ? "members: " + frame.states : "";
    this.story.replaceChildren.apply(this.story, frame.lines.map(function (line) {
      const item = document.createElement("li"); item.textContent = line; return item;
    }));
    const view = views[this.chart];
    if (view) { view.signal("cursor_ms", frame.time_ms).runAsync(); }
  };
  Player.prototype.play = function () {
    const self = this;
    if (this.index >= this.frames.length - 1) { this.go(0); }
    this.playButton.textContent = "❚❚ Pause";
    this.timer = setInterval(function () {
      if (self.index >= self.frames.length - 1) { self.pause(); return; }
      self.go(self.index + 1);
    }, 350);
  };
  Player.prototype.pause = function () {
    if (this.timer) { clearInterval(this.timer); this.timer = null; }
    this.playButton.textContent = "▶ Play";
  };
  function activate(player) {
    players.forEach(function (p) { p.root.classList.toggle("active", p === player); });
    active = player;
  }
  document.addEventListener("keydown", function (event) {
    if (!active || event.altKey || event.ctrlKey || event.metaKey) { return; }
    if (event.target && event.target.tagName === "INPUT") { return; }
    if (event.key === "ArrowRight") { active.pause(); active.go(active.index + 1); event.preventDefault(); }
    if (event.key === "ArrowLeft") { active.pause(); active.go(active.index - 1); event.preventDefault(); }
  });
  data.players.forEach(function (spec) {
    players.push(new Player(document.getElementById("player-" + spec.variant), spec));
  });
  if (players.length) { activate(players[0]); }
  Promise.all(data.charts.map(function (chart) {
    return vegaEmbed("#" + chart.id, chart.spec, {mode: "vega", renderer: "svg", actions: false}).then(function (result) {
      views[chart.id] = result.view;
    });
  })).then(function () {
    players.forEach(function (p) { p.go(p.index); });
    document.body.dataset.ready = "true";
  }, function (error) {
    document.body.dataset.ready = "error";
    console.error(error);
  });
})();
