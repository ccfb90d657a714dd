/* A line chart on a <canvas>, no library: series of (time, value) points, redrawn whole at each
   update. Used by the console's live page; exposes window.LineChart. */
"use strict";
(function () {
  const COLORS = ["#2f6fde", "#e67e22", "#1e8a4c", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d"];
  const MAX_POINTS = 120;   // two minutes at one poll a second

  class LineChart {
    constructor(canvas, legend) {
      this.canvas = canvas;
      this.legend = legend;
      this.series = new Map();   // name -> [[t, v], ...]
      this.updates = 0;
    }

    add(name, t, value) {
      let points = this.series.get(name);
      if (!points) { points = []; this.series.set(name, points); }
      points.push([t, value]);
      if (points.length > MAX_POINTS) points.shift();
    }

    draw() {
      const canvas = this.canvas;
      const ratio = window.devicePixelRatio || 1;
      const width = canvas.clientWidth, height = canvas.clientHeight;
      canvas.width = width * ratio; canvas.height = height * ratio;
      const g = canvas.getContext("2d");
      g.setTransform(ratio, 0, 0, ratio, 0, 0);
      g.clearRect(0, 0, width, height);
      const all = [...this.series.values()].flat();
      const left = 56, right = 10, top = 10, bottom = 22;
      g.strokeStyle = "#d9dee7"; g.fillStyle = "#6a7385"; g.font = "11px sans-serif";
      g.strokeRect(left, top, width - left - right, height - top - bottom);
      if (all.length === 0) { this.updates += 1; this.canvas.dataset.updates = this.updates; return; }
      const t0 = Math.min(...all.map(p => p[0])), t1 = Math.max(...all.map(p => p[0]), t0 + 1000);
      const vmax = Math.max(1, ...all.map(p => p[1])) * 1.1;
      const x = t => left + (t - t0) / (t1 - t0) * (width - left - right);
      const y = v => height - bottom - v / vmax * (height - top - bottom);
      for (let i = 0; i <= 4; i++) {
        const v = vmax * i / 4;
        g.fillText(v >= 100 ? v.toFixed(0) : v.toFixed(1), 4, y(v) + 4);
        g.beginPath(); g.moveTo(left, y(v)); g.lineTo(width - right, y(v)); g.stroke();
      }
      g.fillText(new Date(t1).toLocaleTimeString(), width - right - 60, height - 6);
      g.fillText(new Date(t0).toLocaleTimeString(), left, height - 6);
      this.legend.textContent = "";
      let index = 0;
      for (const [name, points] of this.series) {
        const color = COLORS[index++ % COLORS.length];
        g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
        points.forEach(([t, v], i) => (i ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
        g.stroke(); g.lineWidth = 1;
        const item = document.createElement("span");
        const swatch = document.createElement("i");
        swatch.style.background = color;
        item.append(swatch, `${name}: ${points[points.length - 1][1]}`);
        this.legend.append(item);
      }
      this.updates += 1;
      this.canvas.dataset.updates = this.updates;
      this.canvas.dataset.points = all.length;
    }
  }
  window.LineChart = LineChart;
})();
