// Draws the admin index's charts from the JSON the page carries (#dashboard-data).
"use strict";
(function () {
  const source = document.getElementById("dashboard-data");
  if (!source || typeof Chart === "undefined") return;
  const data = JSON.parse(source.textContent);
  const STATUS_COLOURS = {
    queued: "#7a869a", running: "#2f6fde", cancelling: "#d98e04",
    finished: "#2e8540", failed: "#c62828", cancelled: "#6d4c41",
  };
  const PALETTE = ["#2f6fde", "#2e8540", "#d98e04", "#8e24aa", "#00838f", "#c62828", "#6d4c41"];
  const days = data.days.map((day) => day.slice(5));  // MM-DD
  const common = { animation: false, responsive: true, maintainAspectRatio: false };

  function draw(id, config) {
    const canvas = document.getElementById(id);
    if (canvas) new Chart(canvas, { ...config, options: { ...common, ...(config.options || {}) } });
  }

  draw("chart-calls", {
    type: "bar",
    data: {
      labels: days,
      datasets: [
        { label: "calls", data: data.usage.calls, backgroundColor: "#2f6fde" },
        { label: "errors", data: data.usage.errors, backgroundColor: "#c62828" },
      ],
    },
  });
  draw("chart-tokens", {
    type: "line",
    data: {
      labels: days,
      datasets: [{ label: "tokens", data: data.usage.tokens, borderColor: "#8e24aa", fill: false }],
    },
  });
  draw("chart-keys", {
    type: "line",
    data: {
      labels: days,
      datasets: data.keys.map((key, n) => ({
        label: key.name, data: key.calls, borderColor: PALETTE[n % PALETTE.length], fill: false,
      })),
    },
  });
  draw("chart-latency", {
    type: "bar",
    data: {
      labels: data.latency.map((row) => row.model),
      datasets: [
        { label: "p50 s", data: data.latency.map((row) => row.p50), backgroundColor: "#2e8540" },
        { label: "p95 s", data: data.latency.map((row) => row.p95), backgroundColor: "#d98e04" },
      ],
    },
  });
  draw("chart-jobs", {
    type: "bar",
    data: {
      labels: days,
      datasets: Object.entries(data.jobs_per_day).map(([status, values]) => ({
        label: status, data: values, backgroundColor: STATUS_COLOURS[status] || "#999",
      })),
    },
    options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } } },
  });
})();
