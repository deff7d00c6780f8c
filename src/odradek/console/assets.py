"""The console's stylesheet and script, served from the package (no CDN, no build step). The
script draws the live charts: it polls ``/api/stats`` and draws SVG polylines, building every
element with DOM calls (no ``innerHTML``), so nothing the broker returns is parsed as markup."""

CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#263238;color:#fff;padding:.5em 1em;display:flex;gap:1.2em;align-items:center}
header a{color:#cfd8dc;text-decoration:none}header a:hover{color:#fff}
header .who{margin-left:auto;font-size:.9em;color:#b0bec5}
main{padding:1em 1.5em}
table{border-collapse:collapse;margin:.5em 0 1.2em;background:#fff}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top;font-size:.92em}
th{background:#eceff1}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.err{color:#b71c1c;background:#ffebee;padding:.5em;border:1px solid #ef9a9a}
.ok{color:#1b5e20;background:#e8f5e9;padding:.5em;border:1px solid #a5d6a7}
.b64{color:#6a1b9a;font-family:monospace}.null{color:#999;font-style:italic}
pre{margin:0;white-space:pre-wrap;word-break:break-all;max-width:40em}
form.inline{display:inline-block;margin:.3em 1em .3em 0;padding:.5em;border:1px solid #ddd;background:#fff}
header form.inline{margin:0;padding:0;border:0;background:none}
.chart{background:#fff;border:1px solid #ddd;margin:.5em 1em 1em 0;display:inline-block}
.legend span{margin-right:1em}
"""

JS = r"""
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var W = 520, H = 180, KEEP = 60;
  var series = {};
  var last = null;
  var colors = ["#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f"];

  function chart(id, title, names) {
    var box = document.getElementById(id);
    if (!box) { return null; }
    var h = document.createElement("h3");
    h.textContent = title;
    box.appendChild(h);
    var svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    svg.setAttribute("class", "chart");
    box.appendChild(svg);
    var legend = document.createElement("div");
    legend.className = "legend";
    var c = {svg: svg, names: names, lines: {}, max: null};
    names.forEach(function (n, i) {
      var line = document.createElementNS(SVGNS, "polyline");
      line.setAttribute("fill", "none"); line.setAttribute("stroke", colors[i % colors.length]);
      line.setAttribute("stroke-width", "2");
      svg.appendChild(line);
      c.lines[n] = line;
      var s = document.createElement("span");
      s.style.color = colors[i % colors.length];
      s.textContent = n;
      s.setAttribute("data-series", n);
      legend.appendChild(s);
      series[id + ":" + n] = [];
    });
    var max = document.createElementNS(SVGNS, "text");
    max.setAttribute("x", 4); max.setAttribute("y", 14); max.setAttribute("font-size", "11");
    svg.appendChild(max);
    c.max = max;
    box.appendChild(legend);
    c.id = id;
    return c;
  }

  function draw(c, unit) {
    var top = 1;
    c.names.forEach(function (n) { series[c.id + ":" + n].forEach(function (v) { if (v > top) { top = v; } }); });
    c.max.textContent = "max " + top.toFixed(1) + " " + unit;
    c.names.forEach(function (n) {
      var pts = series[c.id + ":" + n];
      var out = [];
      for (var i = 0; i < pts.length; i++) {
        var x = (W - 4) * (i + KEEP - pts.length) / (KEEP - 1) + 2;
        var y = H - 4 - (H - 24) * pts[i] / top;
        out.push(x.toFixed(1) + "," + y.toFixed(1));
      }
      c.lines[n].setAttribute("points", out.join(" "));
    });
  }

  function push(id, n, v) {
    var s = series[id + ":" + n];
    s.push(v);
    while (s.length > KEEP) { s.shift(); }
  }

  var tp = chart("throughput", "Throughput (bytes/s)", ["bytes in", "bytes out"]);
  var mp = chart("messages", "Messages in (/s)", ["messages in"]);
  var rq = chart("requests", "Requests (/s)", ["Produce", "Fetch"]);
  var lt = chart("latency", "Request latency, TotalTimeMs (ms)", ["Produce p99", "Fetch p99", "Produce p50", "Fetch p50"]);
  if (!tp) { return; }
  var status = document.getElementById("chart-status");

  function tick() {
    var req = new XMLHttpRequest();
    req.open("GET", "api/stats");
    req.responseType = "json";
    req.onload = function () {
      var s = req.response;
      if (req.status !== 200 || !s) { status.textContent = "stats unavailable (" + req.status + ")"; return; }
      if (last) {
        var dt = Math.max((s.time_ms - last.time_ms) / 1000, 0.001);
        push("throughput", "bytes in", (s.bytes_in - last.bytes_in) / dt);
        push("throughput", "bytes out", (s.bytes_out - last.bytes_out) / dt);
        push("messages", "messages in", (s.messages_in - last.messages_in) / dt);
        push("requests", "Produce", ((s.requests.Produce || 0) - (last.requests.Produce || 0)) / dt);
        push("requests", "Fetch", ((s.requests.Fetch || 0) - (last.requests.Fetch || 0)) / dt);
        ["Produce", "Fetch"].forEach(function (r) {
          var l = s.latency_ms[r] || {};
          push("latency", r + " p99", l["0.99"] || 0);
          push("latency", r + " p50", l["0.50"] || 0);
        });
        draw(tp, "B/s"); draw(mp, "/s"); draw(rq, "/s"); draw(lt, "ms");
      }
      last = s;
      status.textContent = "updated " + new Date(s.time_ms).toISOString() + ", " + s.messages_in + " messages in";
      document.body.setAttribute("data-samples", String((parseInt(document.body.getAttribute("data-samples") || "0", 10)) + 1));
    };
    req.send();
  }
  tick();
  setInterval(tick, 1000);
})();
"""
