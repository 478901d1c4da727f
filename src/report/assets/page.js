// trainscope report: draws the page from the JSON in #trainscope-data with
// Chart.js (embedded above). Every chart is a <canvas class="ts-chart">; once
// all are drawn, <body data-charts="N" data-ready="1"> says how many.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("trainscope-data").textContent);
  var app = document.getElementById("app");
  var charts = [];
  var COLORS = ["#4269d0", "#ef6a4a", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e",
                "#6cc5b0", "#ff725c", "#9498a0", "#efb118", "#38a3a5"];
  var Y_AXIS_WIDTH = 74;  // equal on every time chart, so that their x axes line up

  // ---- helpers --------------------------------------------------------------
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (k === "text") node.textContent = attrs[k];
        else if (k === "class") node.className = attrs[k];
        else node.setAttribute(k, attrs[k]);
      });
    }
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function add(parent, node) { parent.appendChild(node); return node; }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function sig(v, digits) {
    if (!isNum(v)) return "–";
    if (v === 0) return "0";
    return Number(v.toPrecision(digits || 4)).toString();
  }
  function seconds(v) {
    if (!isNum(v)) return "–";
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1) return sig(v) + " s";
    if (a >= 1e-3) return sig(v * 1e3) + " ms";
    if (a >= 1e-6) return sig(v * 1e6) + " µs";
    return sig(v * 1e9) + " ns";
  }
  function duration(s) {
    if (!isNum(s)) return "–";
    if (s < 120) return sig(s, 3) + " s";
    if (s < 7200) return sig(s / 60, 3) + " min";
    return sig(s / 3600, 3) + " h";
  }
  function count(n) { return isNum(n) ? n.toLocaleString("en-US") : "–"; }
  function time(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "–"; }
  function badge(status) { return el("span", { class: "badge " + status, text: status }); }
  function color(i, alpha) {
    var c = COLORS[i % COLORS.length];
    if (alpha === undefined) return c;
    var n = parseInt(c.slice(1), 16);
    return "rgba(" + (n >> 16 & 255) + "," + (n >> 8 & 255) + "," + (n & 255) + "," + alpha + ")";
  }
  function points(xs, ys) {
    var out = new Array(xs.length);
    for (var i = 0; i < xs.length; i++) out[i] = { x: xs[i], y: ys[i] };
    return out;
  }
  function section(title, id) {
    var s = add(app, el("section", { id: id }));
    add(s, el("h2", { text: title }));
    return s;
  }
  function card(parent, title, caption, size) {
    var c = add(parent, el("div", { class: "card" }));
    if (title) add(c, el("div", { class: "title", text: title }));
    var box = add(c, el("div", { class: "chart-box" + (size === true ? " tall" : size ? " " + size : "") }));
    var canvas = add(box, el("canvas", { class: "ts-chart" }));
    var cap = add(c, el("div", { class: "caption" }));
    if (caption) cap.textContent = caption;
    return { canvas: canvas, caption: cap, card: c };
  }
  function makeChart(canvas, config) {
    config.options = config.options || {};
    var o = config.options;
    o.animation = false;
    o.responsive = true;
    o.maintainAspectRatio = false;
    o.normalized = true;
    o.plugins = o.plugins || {};
    // The lower edge of a band has no legend entry of its own (its upper edge names the band).
    o.plugins.legend = o.plugins.legend || { labels: { boxWidth: 12, font: { size: 11 },
      filter: function (item) { return !/ min$|^band low$/.test(item.text); } } };
    var chart = new Chart(canvas, config);
    canvas.setAttribute("data-chart", String(charts.length));
    charts.push(chart);
    return chart;
  }
  function secondsTicks(v) { return seconds(v); }
  // Whole counts only; on a log axis only 1, 10, 100, ...
  function countTick(v) {
    if (!Number.isInteger(v)) return "";
    if (this.type === "logarithmic" && !/^10*$/.test(String(v))) return "";
    return count(v);
  }
  function fixedWidth(axis) { axis.width = Y_AXIS_WIDTH; }
  function spread(values) {
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (v) { if (isNum(v) && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    return lo === Infinity ? 1 : hi / lo;
  }
  function kv(parent, pairs) {
    var dl = add(parent, el("dl", { class: "kv" }));
    pairs.forEach(function (p) {
      add(dl, el("dt", { text: p[0] }));
      var dd = add(dl, el("dd"));
      if (p[1] instanceof Node) dd.appendChild(p[1]); else dd.textContent = p[1] === undefined || p[1] === null ? "–" : String(p[1]);
    });
    return dl;
  }
  function quoteArg(a) { return /^[\w@%+=:,./-]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'"; }

  // A sortable table: columns [{label, get(row) -> value, fmt(value) -> text, text?: bool, title?}];
  // opts.fixed: rows shown after the others whatever the sort (a total).
  function table(parent, columns, rows, opts) {
    opts = opts || {};
    var wrap = add(parent, el("div", { class: "scroll" }));
    var t = add(wrap, el("table", { class: "data" + (opts.cls ? " " + opts.cls : "") }));
    var thead = add(t, el("thead"));
    var hr = add(thead, el("tr"));
    var tbody = add(t, el("tbody"));
    var sortCol = -1, sortDir = 1;
    columns.forEach(function (c, i) {
      var th = add(hr, el("th", { class: (c.text ? "text " : "") + (c.nosort ? "" : "sortable"), text: c.label }));
      if (c.title) th.title = c.title;
      if (c.nosort) return;
      th.addEventListener("click", function () {
        sortDir = sortCol === i ? -sortDir : 1;
        sortCol = i;
        Array.prototype.forEach.call(hr.children, function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(sortDir > 0 ? "sorted-asc" : "sorted-desc");
        render();
      });
    });
    var filter = null;
    function render() {
      var list = rows.filter(function (r) { return !filter || filter(r); });
      if (sortCol >= 0) {
        var get = columns[sortCol].get;
        list.sort(function (a, b) {
          var x = get(a), y = get(b);
          var xn = isNum(x), yn = isNum(y);
          if (xn && yn) return (x - y) * sortDir;
          if (xn !== yn) return xn ? -1 : 1;
          return String(x === undefined || x === null ? "" : x).localeCompare(String(y === undefined || y === null ? "" : y)) * sortDir;
        });
      }
      tbody.textContent = "";
      list.concat(opts.fixed || []).forEach(function (r) {
        var tr = add(tbody, el("tr"));
        if (opts.rowAttrs) opts.rowAttrs(r, tr);
        columns.forEach(function (c) {
          var v = c.get(r);
          var td = add(tr, el("td", { class: c.text ? "text" : "" }));
          if (c.cell) { c.cell(r, td); return; }
          td.textContent = c.fmt ? c.fmt(v, r) : (v === undefined || v === null ? "–" : String(v));
          if (isNum(v)) td.setAttribute("data-value", String(v));
          if (c.field) td.setAttribute("data-field", c.field);
          if (c.tip) td.title = c.tip(r);
        });
      });
    }
    render();
    return { setFilter: function (f) { filter = f; render(); }, render: render, table: t };
  }

  // Min/max band, rolling median and p95 of an envelope (x in seconds or steps).
  function envelopeDatasets(s, ci, label) {
    var ds = [];
    if (s.bucket > 1) {
      ds.push({ label: label + " min", data: points(s.x, s.lo), borderWidth: 0, pointRadius: 0,
                borderColor: color(ci, 0.25), backgroundColor: color(ci, 0.18), fill: false });
      ds.push({ label: label + " max (envelope)", data: points(s.x, s.hi), borderWidth: 0.6, pointRadius: 0,
                borderColor: color(ci, 0.5), backgroundColor: color(ci, 0.18), fill: "-1" });
    } else {
      ds.push({ label: label, data: points(s.x, s.hi), borderWidth: 0.8, pointRadius: s.rows < 300 ? 1.5 : 0,
                borderColor: color(ci, 0.55), backgroundColor: color(ci, 0.55), fill: false });
    }
    ds.push({ label: "rolling median", data: points(s.x, s.median), borderWidth: 1.6, pointRadius: 0,
              borderColor: "#1d2330", fill: false });
    ds.push({ label: "rolling p95", data: points(s.x, s.p95), borderWidth: 1.2, pointRadius: 0,
              borderColor: "#c0362c", borderDash: [5, 3], fill: false });
    return ds;
  }
  function envelopeCaption(s, unit) {
    if (s.bucket > 1) {
      return count(s.rows) + " " + unit + " shown as " + s.x.length + " buckets of up to " + count(s.bucket) +
        " (shaded: min–max of each bucket, so every spike is kept); rolling median and p95 over " +
        count(s.window) + " rows";
    }
    return count(s.rows) + " " + unit + ", every one shown; rolling median and p95 over " + count(s.window) + " rows";
  }

  // ---- run page -------------------------------------------------------------
  function runHeader(run) {
    var head = add(app, el("header", { class: "top" }));
    add(head, el("h1", { text: DATA.title }));
    add(head, badge(run.status));
    add(head, el("span", { class: "sub", text: "run " + run.id + (run.experiment ? " · experiment " + run.experiment : "") }));
    if (run.in_progress) {
      add(app, el("div", { class: "banner running", id: "in-progress",
        text: "This run is in progress: the page shows what was recorded up to " + time(run.heartbeat_ms) +
              " (the latest heartbeat). Write the report again for newer data." }));
    }
    if (run.crashed) {
      add(app, el("div", { class: "banner crashed", id: "crashed",
        text: "This run crashed: a rank or launcher stopped recording without ending the run (its process is gone " +
              "or its heartbeat is stale; recorded status " + run.recorded_status + "). The data up to its last " +
              "flush is shown." }));
    } else if (run.status === "FAILED" || run.status === "KILLED") {
      add(app, el("div", { class: "banner crashed", text: "This run ended " + run.status + "." }));
    }
    (run.notes || []).forEach(function (n) { add(app, el("div", { class: "banner note", text: n })); });
    if (DATA.diagnosis) diagnosisSection(section("Diagnosis", "diagnosis"), DATA.diagnosis);
    var s = section("Run", "overview");
    var launcher = (run.launchers || [])[0];
    var pairs = [
      ["directory", run.dir], ["status", badge(run.status)],
      ["started", time(run.start_ms)], ["ended", run.end_ms ? time(run.end_ms) : (run.in_progress ? "running" : "–")],
      ["duration", duration(run.duration_s)], ["world size", run.world_size], ["hosts", (run.hosts || []).join(", ") || "–"],
      ["records", count(run.region_rows) + " regions · " + count(run.hardware_rows) + " hardware readings · " +
                  count(run.metric_rows) + " metric points"]];
    if (run.command && run.command.length) pairs.splice(1, 0, ["command", run.command.map(quoteArg).join(" ")]);
    if (launcher && launcher.exit_code >= 0) pairs.push(["exit code", launcher.exit_code + (launcher.term_signal ? " (signal " + launcher.term_signal + ")" : "")]);
    kv(s, pairs);
    var params = Object.keys(run.params || {});
    if (params.length) {
      add(s, el("h3", { text: "Params" }));
      kv(s, params.map(function (k) { return [k, run.params[k]]; }));
    }
    var tags = Object.keys(run.tags || {});
    if (tags.length) {
      add(s, el("h3", { text: "Tags" }));
      kv(s, tags.map(function (k) { return [k, run.tags[k]]; }));
    }
    if (run.environment) {
      var d = add(s, el("details"));
      add(d, el("summary", { text: "Environment" }));
      kv(d, Object.keys(run.environment).map(function (k) {
        var v = run.environment[k];
        return [k, typeof v === "object" ? JSON.stringify(v) : v];
      }));
    }
    if ((run.ranks || []).length > 1 || (run.launchers || []).length > 1) {
      var d2 = add(s, el("details"));
      add(d2, el("summary", { text: "Ranks and launchers" }));
      table(d2, [
        { label: "rank", get: function (r) { return r.rank; } },
        { label: "host", text: true, get: function (r) { return r.host; } },
        { label: "pid", get: function (r) { return r.pid; } },
        { label: "status", text: true, get: function (r) { return r.crashed ? "CRASHED" : r.status; } },
        { label: "heartbeat", text: true, get: function (r) { return time(r.heartbeat_ms); } }], run.ranks);
    }
    if ((run.launchers || []).length > 1 || (run.launchers || []).some(function (l) { return l.lost; })) {
      var d5 = add(s, el("details", { open: "" }));
      add(d5, el("summary", { text: "Launchers" }));
      table(d5, [
        { label: "host", text: true, get: function (l) { return l.host; } },
        { label: "pid", get: function (l) { return l.pid; } },
        { label: "status", text: true, get: function (l) {
          // Lost: `trainscope run` vanished (kill -9) while its command went on; its ranks tell the run's status.
          return l.crashed ? "CRASHED" : l.lost ? "LOST" : l.status; } },
        { label: "exit code", get: function (l) { return l.exit_code; } }], run.launchers);
    }
    if (run.outputs && run.outputs.length > 1) {
      run.outputs.forEach(function (o) {
        var d6 = add(s, el("details"));
        add(d6, el("summary", { text: "Launcher " + o.launcher + ": environment and end of its output" }));
        if (o.environment) kv(d6, Object.keys(o.environment).map(function (k) {
          var v = o.environment[k];
          return [k, typeof v === "object" ? JSON.stringify(v) : v];
        }));
        if (o.stdout_tail) add(d6, el("pre", { text: o.stdout_tail }));
        if (o.stderr_tail) add(d6, el("pre", { text: o.stderr_tail }));
      });
    } else if (run.stderr_tail && (run.status !== "FINISHED")) {
      var d3 = add(s, el("details", { open: "" }));
      add(d3, el("summary", { text: "End of stderr.log" }));
      add(d3, el("pre", { text: run.stderr_tail }));
    } else if (run.stdout_tail || run.stderr_tail) {
      var d4 = add(s, el("details"));
      add(d4, el("summary", { text: "End of the output (stdout.log, stderr.log)" }));
      if (run.stdout_tail) add(d4, el("pre", { text: run.stdout_tail }));
      if (run.stderr_tail) add(d4, el("pre", { text: run.stderr_tail }));
    }
  }

  var STAT_COLUMNS = [
    ["count", "count", count], ["median", "median", seconds], ["median_ci_low", "CI low", seconds],
    ["median_ci_high", "CI high", seconds], ["mean", "mean", seconds], ["stdev", "stdev", seconds],
    ["min", "min", seconds], ["p5", "p5", seconds], ["p25", "p25", seconds], ["p75", "p75", seconds],
    ["p95", "p95", seconds], ["p99", "p99", seconds], ["max", "max", seconds], ["total", "total", seconds],
    ["cv", "CV", function (v) { return sig(v, 3); }]];

  function statsTable(parent, stats) {
    // One row per key, CPU and GPU side by side.
    var byKey = {};
    var order = [];
    stats.forEach(function (s) {
      if (!byKey[s.key]) { byKey[s.key] = {}; order.push(s.key); }
      byKey[s.key][s.device] = s;
    });
    var devices = ["CPU", "GPU"].filter(function (d) { return stats.some(function (s) { return s.device === d; }); });
    // A key whose rows come from modules of two classes (--auto's tag): its statistics mix both.
    var tags = (DATA.run && DATA.run.tags) || {};
    var mixes = function (k) { return tags["trainscope.auto.callers." + k]; };
    var cols = [{ label: "key", text: true, get: function (k) { return k; },
                  fmt: function (k) { return mixes(k) ? k + " (mixes " + mixes(k) + ")" : k; } }];
    var shown = STAT_COLUMNS.filter(function (c) {
      return c[0] !== "median_ci_low" && c[0] !== "median_ci_high" &&
        (devices.length === 1 || ["count", "median", "mean", "p95", "max"].indexOf(c[0]) >= 0);
    });
    devices.forEach(function (d) {
      shown.forEach(function (c) {
        var col = { label: (devices.length > 1 ? d + " " : "") + c[1] + (c[0] === "median" ? " [95% CI]" : ""), field: d + "." + c[0],
                    get: function (k) { var s = byKey[k][d]; return s ? s[c[0]] : null; },
                    fmt: function (v, k) {
                      var s = byKey[k][d];
                      if (c[0] !== "median" || !s) return c[2](v);
                      return c[2](v) + (isNum(s.median_ci_low) ? " [" + seconds(s.median_ci_low) + ", " + seconds(s.median_ci_high) + "]" : "");
                    } };
        cols.push(col);
      });
    });
    var t = table(parent, cols, order, { cls: "stats", rowAttrs: function (k, tr) { tr.setAttribute("data-key", k); } });
    add(parent, el("div", { class: "muted",
      text: "Seconds, over every recorded region of every rank. CI: the distribution-free 95% confidence interval of " +
            "the median (– below 6 samples)." + (devices.length > 1 ? " Every statistic of each device: below." : "") }));
    if (devices.length > 1) {
      var all = add(parent, el("details"));
      add(all, el("summary", { text: "Every statistic, one row per key and device" }));
      table(all, [{ label: "key", text: true, get: function (s) { return s.key; } },
                  { label: "device", text: true, get: function (s) { return s.device; } }].concat(STAT_COLUMNS.map(function (c) {
        return { label: c[1], field: c[0], get: function (s) { return s[c[0]]; }, fmt: c[2] };
      })), stats, { cls: "all-stats" });
    }
    return t;
  }

  function histogramCharts(parent, histograms) {
    var grid = add(parent, el("div", { class: "grid" }));
    histograms.forEach(function (h, i) {
      var c = card(grid, h.key + " · " + h.device,
        count(h.counts.reduce(function (a, b) { return a + b; }, 0)) + " regions in " + h.counts.length +
        (h.log ? " log-spaced bins (log x)" : " bins"));
      var logY = spread(h.counts) > 200;
      var bars = h.counts.map(function (n, j) {
        var mid = h.log ? Math.sqrt(h.edges[j] * h.edges[j + 1]) : (h.edges[j] + h.edges[j + 1]) / 2;
        return { x: mid, y: n > 0 || !logY ? n : null };
      });
      makeChart(c.canvas, {
        type: "bar",
        data: { datasets: [{ label: "regions", data: bars, backgroundColor: color(h.device === "GPU" ? 1 : 0, 0.75),
          barPercentage: 1.0, categoryPercentage: 1.0 }] },
        options: { parsing: false, plugins: { legend: { display: false }, tooltip: { callbacks: {
            title: function (items) { var j = items[0].dataIndex; return seconds(h.edges[j]) + " – " + seconds(h.edges[j + 1]); } } } },
          scales: { x: { type: h.log ? "logarithmic" : "linear", min: h.edges[0], max: h.edges[h.edges.length - 1],
                         ticks: { maxTicksLimit: 7, maxRotation: 0, autoSkipPadding: 14, callback: function (v) {
                           if (!h.log) return seconds(v);
                           var m = v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9));
                           return Math.abs(m - 1) < 1e-6 || Math.abs(m - 2) < 1e-6 || Math.abs(m - 5) < 1e-6 ? seconds(v) : "";
                         } },
                         title: { display: true, text: "duration" + (h.log ? " (log)" : "") } },
                    y: { type: logY ? "logarithmic" : "linear", min: logY ? 0.7 : 0, title: { display: true, text: "regions" },
                         ticks: { callback: countTick } } } }
      });
    });
  }

  function timeRange() {
    var hi = 0;
    (DATA.series || []).forEach(function (s) { if (s.x.length) hi = Math.max(hi, s.x[s.x.length - 1]); });
    (DATA.hardware || []).forEach(function (h) { h.datasets.forEach(function (d) { if (d.x.length) hi = Math.max(hi, d.x[d.x.length - 1]); }); });
    return { min: 0, max: hi > 0 ? hi : 1 };
  }

  function seriesCharts(parent, series, range) {
    var grid = add(parent, el("div", { class: "grid wide" }));
    series.forEach(function (s, i) {
      var c = card(grid, s.key + " · " + s.device, envelopeCaption(s, "regions"));
      var all = s.hi.concat(s.lo);
      makeChart(c.canvas, {
        type: "line",
        data: { datasets: envelopeDatasets(s, s.device === "GPU" ? 1 : 0, s.key) },
        options: { parsing: false, spanGaps: true, interaction: { mode: "nearest", axis: "x", intersect: false },
          plugins: { tooltip: { callbacks: { label: function (it) { return it.dataset.label + ": " + seconds(it.parsed.y); },
                                             title: function (items) { return "t = " + sig(items[0].parsed.x, 6) + " s"; } } } },
          scales: { x: { type: "linear", min: range.min, max: range.max, title: { display: true, text: "time since the run started (s)" } },
                    y: { type: spread(all) > 50 ? "logarithmic" : "linear", afterFit: fixedWidth,
                         ticks: { callback: secondsTicks }, title: { display: true, text: "duration" } } } }
      });
    });
  }

  function hardwareCharts(parent, hardware, range) {
    if (!hardware.length) { add(parent, el("p", { class: "muted", text: "No hardware readings in this run (they come with `trainscope run`)." })); return; }
    var primary = hardware.filter(function (h) { return h.primary; });
    var rest = hardware.filter(function (h) { return !h.primary; });
    function draw(container, list) {
      var grid = add(container, el("div", { class: "grid wide" }));
      list.forEach(function (h) {
        var rows = count(h.rows) + " readings" + (h.downsampled ? ", shown min–max decimated (each bucket's minimum and maximum, so every spike is kept)" : ", every one shown");
        if (h.series_total > h.datasets.length) rows += "; " + h.datasets.length + " of " + h.series_total + " series shown";
        var c = card(grid, h.chart + (h.unit ? " (" + h.unit + ")" : ""), rows, "short");
        makeChart(c.canvas, {
          type: "line",
          data: { datasets: h.datasets.map(function (d, i) {
            return { label: d.label, data: points(d.x, d.y), borderWidth: 1.1, pointRadius: d.x.length < 60 ? 2 : 0,
                     borderColor: color(i), backgroundColor: color(i), fill: false };
          }) },
          options: { parsing: false, interaction: { mode: "nearest", axis: "x", intersect: false },
            scales: { x: { type: "linear", min: range.min, max: range.max, title: { display: true, text: "time since the run started (s)" } },
                      y: { afterFit: fixedWidth, title: { display: !!h.unit, text: h.unit } } } }
        });
      });
    }
    draw(parent, primary.length ? primary : rest);
    if (primary.length && rest.length) {
      var d = add(parent, el("details"));
      add(d, el("summary", { text: "All other hardware metrics (" + rest.length + ")" }));
      draw(d, rest);
    }
  }

  function rankCharts(parent, rankStats) {
    var groups = {};
    var order = [];
    rankStats.forEach(function (r) {
      var id = r.key + " · " + r.device;
      if (!groups[id]) { groups[id] = []; order.push(id); }
      groups[id].push(r);
    });
    var grid = add(parent, el("div", { class: "grid" }));
    order.forEach(function (id) {
      var list = groups[id];
      var c = card(grid, id, "median per rank (dot) with its 95% confidence interval (bar) and p25–p75 (thin bar)");
      makeChart(c.canvas, {
        type: "bar",
        data: { labels: list.map(function (r) { return "rank " + r.rank; }), datasets: [
          { type: "line", label: "median", data: list.map(function (r) { return r.median; }), showLine: false,
            pointRadius: 4, borderColor: "#1d2330", backgroundColor: "#1d2330" },
          { label: "95% CI of the median", data: list.map(function (r) { return isNum(r.median_ci_low) ? [r.median_ci_low, r.median_ci_high] : null; }),
            backgroundColor: color(0, 0.55), barPercentage: 0.35 },
          { label: "p25–p75", data: list.map(function (r) { return [r.p25, r.p75]; }), backgroundColor: color(0, 0.18), barPercentage: 0.8 }] },
        options: { plugins: { tooltip: { callbacks: { label: function (it) {
            var v = it.raw; return it.dataset.label + ": " + (Array.isArray(v) ? seconds(v[0]) + " – " + seconds(v[1]) : seconds(v)); } } } },
          scales: { x: { stacked: true }, y: { ticks: { callback: secondsTicks } } } }
      });
    });
    var t = add(parent, el("details"));
    add(t, el("summary", { text: "Per-rank statistics" }));
    table(t, [
      { label: "key", text: true, get: function (r) { return r.key; } },
      { label: "device", text: true, get: function (r) { return r.device; } },
      { label: "rank", get: function (r) { return r.rank; } }].concat(STAT_COLUMNS.map(function (c) {
        return { label: c[1], field: c[0], get: function (r) { return r[c[0]]; }, fmt: c[2] };
      })), rankStats, { cls: "rank-stats" });
  }

  function stragglerCharts(parent, s) {
    add(parent, el("p", { class: "muted", text: "Per step (BATCH regions a rank completed), each rank's total " + s.key + " time on the " +
      s.device + "; the slowest rank's lag behind the median rank (the lower median with an even number of ranks). " +
      count(s.steps) + " steps recorded by at least two ranks; total lag " + seconds(s.lag_total_s) + "." }));
    var grid = add(parent, el("div", { class: "grid" }));
    var c1 = card(grid, "lag of the slowest rank per step", envelopeCaption(s.lag, "steps"));
    makeChart(c1.canvas, {
      type: "line", data: { datasets: envelopeDatasets(s.lag, 4, "lag") },
      options: { parsing: false, interaction: { mode: "nearest", axis: "x", intersect: false },
        scales: { x: { type: "linear", title: { display: true, text: "step" } }, y: { ticks: { callback: secondsTicks } } } }
    });
    var c2 = card(grid, "steps on which each rank was the slowest", "");
    makeChart(c2.canvas, {
      type: "bar", data: { labels: s.ranks.map(function (r) { return "rank " + r; }),
        datasets: [{ label: "slowest in steps", data: s.slowest_count, backgroundColor: color(1, 0.75) }] },
      options: { plugins: { legend: { display: false } } }
    });
  }

  function metricCharts(parent, metrics) {
    // A metric logged once per series (total_flos, train_runtime) is a value, not a line.
    var single = metrics.filter(function (m) { return m.datasets.every(function (d) { return d.x.length <= 1; }); });
    if (single.length) {
      var rows = [];
      single.forEach(function (m) {
        m.datasets.forEach(function (d) {
          if (d.x.length) rows.push({ key: m.key, label: d.label, step: d.x[0], value: d.y[0] });
        });
      });
      add(parent, el("p", { class: "muted", text: "Metrics logged once (one value each, at its step):" }));
      table(parent, [
        { label: "metric", text: true, get: function (r) { return r.key; } },
        { label: "series", text: true, get: function (r) { return r.label; } },
        { label: "step", get: function (r) { return r.step; }, fmt: function (v) { return sig(v, 6); } },
        { label: "value", get: function (r) { return r.value; }, fmt: function (v) { return sig(v, 6); } }], rows);
    }
    var grid = add(parent, el("div", { class: "grid" }));
    metrics.filter(function (m) { return single.indexOf(m) < 0; }).forEach(function (m) {
      var rows = m.datasets.reduce(function (a, d) { return a + d.rows; }, 0);
      var down = m.datasets.some(function (d) { return d.downsampled; });
      var c = card(grid, m.key, count(rows) + " points" + (down ? ", min–max decimated" : ""));
      makeChart(c.canvas, {
        type: "line",
        data: { datasets: m.datasets.map(function (d, i) {
          return { label: d.label, data: points(d.x, d.y), borderWidth: 1.2, pointRadius: d.x.length < 60 ? 2 : 0,
                   borderColor: color(i + 2), backgroundColor: color(i + 2), fill: false };
        }) },
        options: { parsing: false, scales: { x: { type: "linear", title: { display: true, text: "step" } } } }
      });
    });
  }

  // ---- diagnosis (trainscope diagnose) ---------------------------------------
  // Labels by what they ask of the user: a defect (red), a shape to know (amber), fine (green).
  var LABEL_CLASS = { "BALANCED": "ok", "COMPUTE-BOUND": "info", "NO-DATA": "none", "WAIT-HEAVY": "warn", "GPU-IDLE": "warn", "LAUNCH-BOUND": "warn" };
  var PHASE_NAMES = { data_wait: "data wait", h2d: "host to device", forward: "forward", backward: "backward",
                      optimizer: "optimizer", comm: "communication", rest: "rest of the step" };
  function interval(v, f) {
    if (!v || !isNum(v.value)) return "–";
    return f(v.value) + (isNum(v.low) && isNum(v.high) ? " [" + f(v.low) + ", " + f(v.high) + "]" : "");
  }
  function quantityFormat(q) {
    if (/share|_pct$/.test(q || "")) return pct;
    if (/_s$|seconds/.test(q || "")) return seconds;
    return function (v) { return sig(v, 3); };
  }
  function labelTitle(l) {
    var who = [];
    if (l.kind) who.push(l.kind);
    if (isNum(l.rank)) who.push("rank " + l.rank);
    if (l.host) who.push(l.host);
    return l.name + (who.length ? "(" + who.join(", ") + ")" : "");
  }
  function labelBadge(l) {
    return el("span", { class: "badge diag diag-" + (LABEL_CLASS[l.name] || "bad"), "data-label": l.name, text: labelTitle(l) });
  }
  // The phase table: one row per phase and device, the last K steps beside the whole run.
  function phaseTable(parent, d) {
    var rows = [], index = {};
    [["window", d.window], ["run", d.run]].forEach(function (pair) {
      ((pair[1] || {}).phases || []).forEach(function (p) {
        var id = p.phase + "·" + p.device;
        if (!(id in index)) { index[id] = rows.length; rows.push({ phase: p.phase, device: p.device }); }
        rows[index[id]][pair[0]] = p;
      });
    });
    function of(scope, field) { return function (r) { return r[scope] ? r[scope][field] : null; }; }
    function worst(scope) {
      return { label: "worst rank", field: scope + ".worst_rank_s", title: "the largest rank median, and which rank",
        get: of(scope, "worst_rank_s"), fmt: function (v, r) { return r[scope] && isNum(v) ? seconds(v) + " (rank " + r[scope].worst_rank + ")" : "–"; } };
    }
    function cols(scope, name) {
      return [
        { label: name + " median", field: scope + ".median_s", get: of(scope, "median_s"), fmt: seconds, title: "median of every rank's steps" },
        { label: "p95", field: scope + ".p95_s", get: of(scope, "p95_s"), fmt: seconds },
        { label: "share", field: scope + ".share", get: of(scope, "share"), fmt: pct, title: "of the step time, summed over all ranks' steps (warm-up steps dropped; the data wait here is the IO inside steps, not Data stalls' every fetch over the passes' time)" },
        worst(scope),
        { label: "skew", field: scope + ".skew", get: of(scope, "skew"), fmt: pct, title: "worst rank median over the median rank's, minus 1" }];
    }
    table(parent, [
      { label: "phase", text: true, field: "phase", get: function (r) { return PHASE_NAMES[r.phase] || r.phase; } },
      { label: "device", text: true, field: "device", get: function (r) { return r.device; } }]
      .concat(cols("window", "last " + count((d.window || {}).steps) + " steps:"), cols("run", "run:")),
      rows, { cls: "diag-phases", rowAttrs: function (r, tr) { tr.setAttribute("data-phase", r.phase); tr.setAttribute("data-device", r.device); } });
  }
  function diagnosisSection(parent, d) {
    if (d.error) { add(parent, el("div", { class: "banner note", id: "diagnosis-error", text: d.error })); return; }
    var running = d.status === "RUNNING";
    var scope = (running ? d.window : d.run) || {};
    var labels = scope.labels || [];
    var head = add(parent, el("div", { class: "diag-head", id: "diagnosis-headline", "data-headline": d.headline || "" }));
    labels.forEach(function (l) { add(head, labelBadge(l)); });
    if (!labels.length) add(head, labelBadge({ name: "NO-DATA" }));
    add(head, el("span", { class: "muted", text: (running ? "over the last " + count(scope.steps) + " steps (the run goes on)" :
      "over the run: " + count(scope.steps) + " steps per rank after " + count(scope.warmup) + " warm-up") +
      (isNum(d.world_size) && d.world_size > 1 ? ", " + d.world_size + " ranks" : "") }));
    var list = add(parent, el("ul", { class: "diag-labels" }));
    labels.forEach(function (l) {
      var li = add(list, el("li", { "data-label": l.name }));
      add(li, el("b", { text: labelTitle(l) }));
      if (l.evidence) li.appendChild(document.createTextNode(": " + l.evidence));
      if (l.next_step) add(li, el("div", { class: "diag-next", text: "Next: " + l.next_step }));
      if (l.value && isNum(l.value.value)) {
        var f = quantityFormat(l.quantity);
        var test = add(li, el("div", { class: "diag-test" }));
        test.appendChild(document.createTextNode((l.quantity || "estimate") + " "));
        add(test, el("span", { "data-field": "value", "data-value": String(l.value.value), text: interval(l.value, f) }));
        if (isNum(l.threshold) && l.threshold_name) {
          test.appendChild(document.createTextNode(" against " + l.threshold_name + " = " + f(l.threshold)));
        }
      }
    });
    var pairs = [];
    if (scope.step_s) pairs.push(["step time", interval(scope.step_s, seconds) + " (mean of the median rank, 95% interval)"]);
    if (isNum(scope.steps_per_s) && scope.steps_per_s > 0) pairs.push(["steps/s", sig(scope.steps_per_s, 4)]);
    (d.host_now || []).forEach(function (h) {  // the contention and step wait shares, docs/steps.md
      var at = (d.host_now.length > 1) ? " @" + h.host : "";
      if (h.contention && isNum(h.contention.share)) {
        pairs.push(["waited for a CPU" + at,
          interval({ value: h.contention.share, low: h.contention.low, high: h.contention.high }, pct) +
          " of the time (the job's threads' run-queue wait, last 10 s of readings)"]);
      }
      if (h.step_wait && isNum(h.step_wait.share)) {
        pairs.push(["step thread waited" + at,
          interval({ value: h.step_wait.share, low: h.step_wait.low, high: h.step_wait.high }, pct) +
          " of its steps (its own run-queue wait in the steps of the last 10 s)"]);
      }
    });
    if (pairs.length) kv(parent, pairs);
    (scope.notes || []).forEach(function (n) { add(parent, el("div", { class: "muted diag-note", text: "Not judged: " + n })); });
    // Anomaly captures (docs/auto.md): a link to each Chrome trace, at its step.
    (d.captures || []).forEach(function (c) {
      var why = c.label ? c.label + " appeared by step " + c.step  // a label's capture (docs/auto.md)
        : "step " + c.step + " was slow (past 5\u00d7 the rolling p99)";
      var line = add(parent, el("div", { class: "diag-capture", "data-rank": String(c.rank), "data-step": String(c.step),
        "data-label": c.label || "", text: "Rank " + c.rank + ", " + why + ": the steps after it are captured in " }));
      add(line, el("a", { href: (d.run_dir ? d.run_dir + "/" : "") + c.path, text: c.path }));
    });
    // The efficiency ledger (docs/ledger.md): its line and each rank's figures.
    if (d.ledger) {
      add(parent, el("div", { class: "diag-ledger", id: "diagnosis-ledger", text: d.ledger.line }));
      var perSecond = function (v) { return isNum(v) ? sig(v, 4) : "–"; };
      table(parent, [
        { label: "rank", field: "rank", get: function (r) { return r.rank; } },
        { label: "steps", field: "steps", get: function (r) { return r.steps; }, fmt: count },
        { label: "tokens/s", field: "tokens_per_s", get: function (r) { return r.tokens_per_s; }, fmt: perSecond },
        { label: "samples/s", field: "samples_per_s", get: function (r) { return r.samples_per_s; }, fmt: perSecond },
        { label: "FLOP/s", field: "achieved_flops", get: function (r) { return r.achieved_flops; }, fmt: perSecond },
        { label: "MFU", field: "mfu", get: function (r) { return r.mfu; }, fmt: pct }],
        d.ledger.ranks || [], { cls: "diag-ledger-ranks" });
    }
    if ((d.window && (d.window.phases || []).length) || (d.run && (d.run.phases || []).length)) {
      add(parent, el("h3", { text: "Phases of the step" }));
      phaseTable(parent, d);
    }
    add(parent, el("p", { class: "muted", text: "Each label holds when its 95% interval lies wholly beyond its threshold (docs/diagnosis.md). " +
      "`trainscope diagnose " + (DATA.run ? DATA.run.dir : "RUN") + "` prints the same; `trainscope top` follows a live run." }));
  }

  // ---- data stalls (trainscope stalls) ---------------------------------------
  var STALL_COLORS = { not: "#3ca951", moderately: "#efb118", highly: "#c0362c" };
  function pct(v) { return isNum(v) ? sig(100 * v, 3) + "%" : "–"; }
  function rate(v) { return isNum(v) ? sig(v, 4) + " samples/s" : "–"; }
  function stallClass(c) { return el("span", { class: "badge stall-" + c, text: c + " input-bound" }); }
  // A number the page shows, with its exact value for readers of the DOM.
  function shown(field, value, text) {
    var attrs = { "data-field": field, text: text };
    if (isNum(value)) attrs["data-value"] = String(value);
    return el("span", attrs);
  }
  function withCi(field, value, ci, f) {
    var node = el("span");
    node.appendChild(shown(field, value, f(value)));
    node.appendChild(document.createTextNode(" ± "));
    node.appendChild(shown(field + "_ci", ci, f(ci)));
    return node;
  }
  // Horizontal (axis "y") or vertical (axis "x") reference lines drawn over a chart, labelled.
  function referenceLines(axis, lines) {
    return { id: "reference-lines", afterDatasetsDraw: function (chart) {
      var scale = chart.scales[axis], area = chart.chartArea, ctx = chart.ctx;
      if (!scale) return;
      ctx.save();
      lines.forEach(function (l) {
        var p = scale.getPixelForValue(l.value);
        if (!isFinite(p)) return;
        ctx.strokeStyle = l.color; ctx.lineWidth = l.width || 1.2; ctx.setLineDash(l.dash || [5, 3]);
        ctx.beginPath();
        if (axis === "y") {
          if (p < area.top - 1 || p > area.bottom + 1) return;
          ctx.moveTo(area.left, p); ctx.lineTo(area.right, p);
        } else {
          if (p < area.left - 1 || p > area.right + 1) return;
          ctx.moveTo(p, area.top); ctx.lineTo(p, area.bottom);
        }
        ctx.stroke();
        if (l.label) {  // on a white box, so that bars and lines under it do not hide it
          ctx.setLineDash([]); ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "alphabetic";
          var w = ctx.measureText(l.label).width;
          var tx = axis === "y" ? area.right - 4 - w : p + 3, ty = axis === "y" ? p - 4 : area.top + 11;
          ctx.fillStyle = "rgba(255,255,255,0.85)";
          ctx.fillRect(tx - 2, ty - 10, w + 4, 13);
          ctx.fillStyle = l.color; ctx.textAlign = "left";
          ctx.fillText(l.label, tx, ty);
        }
      });
      ctx.restore();
    } };
  }
  var PATTERNS = {
    "none": "too little waiting to matter (under 5% of the time)",
    "spread": "spread over the passes: the loader is slower than the step",
    "bunched at pass starts": "bunched at pass starts: worker start-up or cold caches, not a slow pipeline"
  };

  // The live method: the run's IO regions, per pass and for the run (trainscope stalls RUN_DIR).
  function runStallsSection(parent, st, range) {
    if (st.error) { add(parent, el("div", { class: "banner note", id: "stalls-error", text: st.error })); return; }
    var r = st.run;
    var head = add(parent, el("div", { class: "stall-head" }));
    add(head, el("span", { class: "stall-share", id: "stalls-share", "data-value": String(r.data_wait_share), text: pct(r.data_wait_share) }));
    add(head, el("span", { text: "of the steps' time waiting for data (every step: the diagnosis's data wait drops the warm-up steps)" }));
    add(head, stallClass(r.input_bound));
    kv(parent, [
      ["waits", shown("pattern", null, PATTERNS[st.pattern] || st.pattern)],
      ["time waiting", seconds(r.wait_s) + " of " + seconds(r.wall_s) + " in " + count(st.passes.length) + (st.passes.length === 1 ? " pass" : " passes")],
      ["batches", count(r.batches) + (st.batch_size ? " of " + st.batch_size + " samples" : "")],
      ["wait per batch", "p50 " + seconds(r.wait_p50_s) + " · p95 " + seconds(r.wait_p95_s) + " · max " + seconds(r.wait_max_s)],
      ["at pass starts", pct(r.startup_wait_share) + " of the wait falls in the first tenth of each pass's batches"],
      ["recorded by", "rank " + st.rank + (DATA.run.world_size > 1 ? " (the lowest; as `trainscope stalls`)" : "")]].concat(
      (st.ranks || []).length > 1 ? [["per rank", (function () {
        var most = st.ranks.reduce(function (a, b) { return b.data_wait_share > a.data_wait_share ? b : a; });
        return st.ranks.map(function (k) { return "rank " + k.rank + " " + pct(k.data_wait_share); }).join(" · ") +
          " (rank " + most.rank + " waits most: every step of a data-parallel job waits for it)";
      })()]] : []));
    add(parent, el("p", { class: "muted", text: "The steps' data wait (the step thread's IO regions, of `for batch in tmr.timed(loader):` " +
      "or around each fetch, overlapping each step's period: one definition for the diagnosis, compare and stalls, docs/steps.md) " +
      "over their periods, per pass over the loader (loader_epoch regions, else EPOCH): the figures of " +
      "`trainscope stalls RUN_DIR`. The wait for the first batch, before any step, is in none; the waits per batch are the IO regions'. Classes as TensorFlow's input-pipeline analyzer: under 5% not, 5–20% moderately, " +
      "20% or more highly input-bound. A pass's waits are bunched when it is at least moderately input-bound and half its " +
      "wait falls in its first tenth of batches. Not the diagnosis's data wait: that one is the IO time inside the steps " +
      "over the steps' time, warm-up steps dropped; this one is every fetch (the first of each pass, which comes before " +
      "any step, and the warm-up's included) over the passes' wall time." }));
    var grid = add(parent, el("div", { class: "grid two" }));
    var labels = st.passes.map(function (p) { return String(p.pass); });
    var c1 = card(grid, "data-wait share per pass", count(st.passes.length) + (st.passes.length === 1 ? " pass" : " passes") +
      " (bars coloured by class); dashed: the 5% and 20% class thresholds");
    makeChart(c1.canvas, {
      type: "bar",
      data: { labels: labels, datasets: [{ label: "data-wait share", data: st.passes.map(function (p) { return 100 * p.data_wait_share; }),
        backgroundColor: st.passes.map(function (p) { return STALL_COLORS[p.input_bound] || color(0); }),
        maxBarThickness: 48 }] },
      options: { plugins: { legend: { display: false }, tooltip: { callbacks: {
          title: function (items) { return "pass " + items[0].label; },
          label: function (it) { var p = st.passes[it.dataIndex]; return pct(p.data_wait_share) + " waiting (" + p.input_bound + " input-bound), " + count(p.batches) + " batches"; } } } },
        scales: { x: { title: { display: true, text: "pass" } },
                  y: { min: 0, suggestedMax: 25, title: { display: true, text: "% of the pass's time" }, ticks: { callback: function (v) { return v + "%"; } } } } },
      plugins: [referenceLines("y", [{ value: 5, color: "#9a6700", label: "5% moderately" }, { value: 20, color: "#c0362c", label: "20% highly" }])]
    });
    var w = st.waits;
    var c2 = card(grid, "wait for each batch over the run", envelopeCaption(w, "waits") +
      (st.pass_starts_s.length > 1 ? "; dotted: pass starts" : ""));
    var allW = w.hi.concat(w.lo);
    makeChart(c2.canvas, {
      type: "line",
      data: { datasets: envelopeDatasets(w, 1, "wait") },
      options: { parsing: false, spanGaps: true, interaction: { mode: "nearest", axis: "x", intersect: false },
        plugins: { tooltip: { callbacks: { label: function (it) { return it.dataset.label + ": " + seconds(it.parsed.y); },
                                           title: function (items) { return "t = " + sig(items[0].parsed.x, 6) + " s"; } } } },
        scales: { x: { type: "linear", min: range.min, max: range.max, title: { display: true, text: "time since the run started (s)" } },
                  y: { type: spread(allW) > 50 ? "logarithmic" : "linear", ticks: { callback: secondsTicks }, title: { display: true, text: "wait" } } } },
      plugins: [referenceLines("x", st.pass_starts_s.length > 1 ? st.pass_starts_s.map(function (x) { return { value: x, color: "#5d6675", dash: [2, 3], width: 1 }; }) : [])]
    });
    add(parent, el("h3", { text: "Per pass" }));
    table(parent, [
      { label: "pass", field: "pass", get: function (p) { return p.pass; }, fmt: function (v) { return v === 0 ? "run" : String(v); } },
      { label: "share", field: "data_wait_share", title: "the pass's waits over its time", get: function (p) { return p.data_wait_share; }, fmt: pct },
      { label: "input-bound", text: true, field: "input_bound", get: function (p) { return p.input_bound; } },
      { label: "batches", field: "batches", get: function (p) { return p.batches; }, fmt: count },
      { label: "waiting", field: "wait_s", get: function (p) { return p.wait_s; }, fmt: seconds },
      { label: "time", field: "wall_s", get: function (p) { return p.wall_s; }, fmt: seconds },
      { label: "wait p50", field: "wait_p50_s", get: function (p) { return p.wait_p50_s; }, fmt: seconds },
      { label: "wait p95", field: "wait_p95_s", get: function (p) { return p.wait_p95_s; }, fmt: seconds },
      { label: "wait max", field: "wait_max_s", get: function (p) { return p.wait_max_s; }, fmt: seconds },
      { label: "at start", field: "startup_wait_share", title: "share of the pass's wait in its first tenth of batches (at least 2)",
        get: function (p) { return p.startup_wait_share; }, fmt: pct },
      { label: "bunched", text: true, field: "bunched", get: function (p) { return p.bunched ? "yes" : "no"; } }],
      st.passes, { cls: "stalls-passes", fixed: [r], rowAttrs: function (p, tr) { tr.setAttribute("data-pass", p.pass === 0 ? "run" : String(p.pass)); } });
  }

  // An analysis's runs as they ran: synthetic, cold, warm, the varied warm runs by value, then others.
  function legsInOrder(runs) {
    var order = { synthetic: 0, cold: 1, warm: 2 };
    return Object.keys(runs).sort(function (a, b) {
      var x = a in order ? order[a] : /^warm-/.test(a) ? 3 : 4, y = b in order ? order[b] : /^warm-/.test(b) ? 3 : 4;
      if (x !== y) return x - y;
      var nx = Number(a.slice(a.lastIndexOf("-") + 1)), ny = Number(b.slice(b.lastIndexOf("-") + 1));
      return isFinite(nx) && isFinite(ny) && nx !== ny ? nx - ny : a.localeCompare(b);
    });
  }

  // DS-Analyzer's differential method: stalls.json of `trainscope stalls --dataset`.
  function analysisSection(parent, a, leg) {
    var box = add(parent, el("div", { class: "stalls-analysis", "data-dir": a.dir }));
    if (a.error) { add(box, el("div", { class: "banner note stalls-analysis-error", text: a.error })); return; }
    var A = a.analysis, d = A.differential, runs = A.runs, wi = A.what_if;
    var n = A.iterations, legs = legsInOrder(runs);
    add(box, el("p", { class: "muted", text: "`trainscope stalls --dataset` ran the command " + legs.length + " times, " + n +
      " measured iterations after " + A.warmup + " warm-up each: synthetic (the loader hands out its first batch again and again: " +
      "compute alone, T1), cold (the dataset evicted from the page cache: T2), warm (the dataset read in first: T3)" +
      (runs.loader ? " and loader (warm, the loader alone: batches taken as soon as they are ready, none handed to the loop: the loader's own rate)" : "") + ". " +
      "Prep stall T3 − T1 and fetch stall T2 − T3 as shares of T2, with 95% intervals. From " + a.file + "." +
      (leg ? " This run is its " + leg + " run." : "") }));
    var fl = add(box, el("ul", { class: "findings" }));
    (A.findings || []).forEach(function (f) { add(fl, el("li", { text: f })); });
    (A.notes || []).forEach(function (t) { add(box, el("div", { class: "banner note", text: "note: " + t })); });
    var T = function (name) { return runs[name] || {}; };
    var agree = el("span");
    agree.appendChild(shown("methods_agree", null, d.methods_agree ? "agree (within 5 points)" : "disagree"));
    if (!d.methods_agree && d.reconcile) agree.appendChild(document.createTextNode(": " + d.reconcile));
    var cache = wi.cache || {};
    kv(box, [
      ["dataset", (A.dataset || {}).path + (A.dataset && A.dataset.residency_before ? " (" + sig(A.dataset.residency_before.bytes / 1e6, 4) + " MB in " +
        count(A.dataset.residency_before.files) + " files)" : "")],
      ["batch size", shown("batch_size", A.batch_size, count(A.batch_size))],
      ["T1 synthetic", withCi("synthetic.time_s", T("synthetic").time_s, T("synthetic").time_ci_s, seconds)],
      ["T2 cold", withCi("cold.time_s", T("cold").time_s, T("cold").time_ci_s, seconds)],
      ["T3 warm", withCi("warm.time_s", T("warm").time_s, T("warm").time_ci_s, seconds)],
      ["ingestion rate", shown("ingestion_rate", d.ingestion_rate, rate(d.ingestion_rate) + " (what the step can take: N·B/T1)")],
      ["prep rate", shown("prep_rate", d.prep_rate, rate(d.prep_rate) + " (N·B/T3)")],
      ["fetch rate", shown("fetch_rate", d.fetch_rate, d.fetch_rate > 0 ? rate(d.fetch_rate) + " (N·B/(T2 − T3))" : "not limiting (T2 ≤ T3)")],
      ["prep stall", withCi("prep_share", d.prep_share, d.prep_share_ci, pct)],
      ["fetch stall", withCi("fetch_share", d.fetch_share, d.fetch_share_ci, pct)],
      ["live share (cold run)", shown("live_wait_share_cold", d.live_wait_share_cold, pct(d.live_wait_share_cold) + " of the same iterations waiting in the loader")],
      ["the two methods", agree],
      ["loader alone", wi.gpus ? rate(wi.gpus.loader_samples_per_s) + " warm, " + rate(wi.gpus.loader_samples_per_s_cold) +
        " uncached" + (wi.gpus.basis ? " (" + wi.gpus.basis + ")" : "") : "–"],
      ["GPUs until data-bound", shown("gpus_until_data_bound", wi.gpus_until_data_bound, isNum(wi.gpus_until_data_bound) ?
        sig(wi.gpus_until_data_bound, 3) + "× this node's GPUs" + (wi.gpus && isNum(wi.gpus.until_data_bound_cold) ?
          " (" + sig(wi.gpus.until_data_bound_cold, 3) + "× with the dataset uncached)" : "") +
        ": ingestion scales with them, the loader is shared" : "–")],
      ["cache what-if from", "disk " + sig(cache.disk_read_mb_s, 4) + " MB/s (the cold run's reads" +
        (cache.disk_rate_from ? ", from " + cache.disk_rate_from : "") + "), memory " + sig(cache.memory_mb_s, 4) +
        " MB/s, " + sig(cache.bytes_per_sample, 4) + " bytes per sample" + (cache.basis ? "; " + cache.basis +
        (isNum(cache.overlap_k) ? " (k = " + sig(cache.overlap_k, 3) + ")" : cache.overlap_k === null ? " (fully overlapped)" : "") : "")]]);
    add(box, el("h3", { text: "Each run of the analysis" }));
    table(box, [
      { label: "run", text: true, field: "leg", get: function (l) { return l; } },
      { label: "time", field: "time_s", title: "the measured iterations' time", get: function (l) { return runs[l].time_s; }, fmt: seconds },
      { label: "± 95%", field: "time_ci_s", get: function (l) { return runs[l].time_ci_s; }, fmt: seconds },
      { label: "per iteration", field: "per_iteration_s", get: function (l) { return runs[l].time_s / n; }, fmt: seconds },
      { label: "waiting (live)", field: "live_wait_share", get: function (l) { return runs[l].live_wait_share; }, fmt: pct },
      { label: "input-bound", text: true, get: function (l) { var x = runs[l].analysis; return x && x.run ? x.run.input_bound : null; } },
      { label: "resident", field: "resident_share", title: "the dataset's share in the page cache before the run", get: function (l) { return runs[l].residency ? runs[l].residency.resident_share : null; }, fmt: pct },
      { label: "disk read", field: "disk_read_mb_s", get: function (l) { return runs[l].disk_read_mb_s; }, fmt: function (v) { return isNum(v) ? sig(v, 4) + " MB/s" : "–"; } },
      { label: "read", field: "read_mb", get: function (l) { return runs[l].read_mb; }, fmt: function (v) { return isNum(v) ? sig(v, 4) + " MB" : "–"; } },
      { label: "CPU", field: "cpu_pct", get: function (l) { return runs[l].cpu_pct; }, fmt: function (v) { return isNum(v) ? sig(v, 3) + "%" : "–"; } }],
      legs, { cls: "stalls-legs", rowAttrs: function (l, tr) { tr.setAttribute("data-leg", l); } });
    var grid = add(box, el("div", { class: "grid two" }));
    var c1 = card(grid, "time of the " + n + " measured iterations", "bars: each run's time; dark: its 95% interval");
    makeChart(c1.canvas, {
      type: "bar",
      data: { labels: legs, datasets: [
        { label: "time", data: legs.map(function (l) { return runs[l].time_s; }), backgroundColor: legs.map(function (l, i) { return color(i, 0.7); }), barPercentage: 0.7 },
        { label: "95% interval", data: legs.map(function (l) { var t = runs[l]; return isNum(t.time_ci_s) ? [t.time_s - t.time_ci_s, t.time_s + t.time_ci_s] : null; }),
          backgroundColor: "rgba(29,35,48,0.75)", barPercentage: 0.12 }] },
      options: { plugins: { legend: { display: false }, tooltip: { callbacks: { label: function (it) {
          var v = it.raw; return it.dataset.label + ": " + (Array.isArray(v) ? seconds(v[0]) + " – " + seconds(v[1]) : seconds(v)); } } } },
        scales: { x: { stacked: true }, y: { min: 0, ticks: { callback: secondsTicks }, title: { display: true, text: "time" } } } }
    });
    var rest = Math.max(0, 1 - d.prep_share - d.fetch_share);
    var c2 = card(grid, "where the cold run's time goes", "differential: prep " + pct(d.prep_share) + " ± " + pct(d.prep_share_ci) +
      ", fetch " + pct(d.fetch_share) + " ± " + pct(d.fetch_share_ci) + "; live: " + pct(d.live_wait_share_cold) + " waiting; the methods " +
      (d.methods_agree ? "agree" : "disagree"));
    makeChart(c2.canvas, {
      type: "bar",
      data: { labels: ["differential", "live"], datasets: [
        { label: "compute (T1)", data: [100 * rest, null], backgroundColor: color(0, 0.7) },
        { label: "prep stall", data: [100 * d.prep_share, null], backgroundColor: STALL_COLORS.moderately },
        { label: "fetch stall", data: [100 * d.fetch_share, null], backgroundColor: STALL_COLORS.highly },
        { label: "waiting in the loader", data: [null, 100 * d.live_wait_share_cold], backgroundColor: "#a463f2" },
        { label: "not waiting", data: [null, 100 * Math.max(0, 1 - d.live_wait_share_cold)], backgroundColor: color(0, 0.35) }] },
      options: { indexAxis: "y", plugins: { tooltip: { callbacks: { label: function (it) { return it.dataset.label + ": " + sig(it.raw, 3) + "%"; } } } },
        scales: { x: { stacked: true, min: 0, max: 100, title: { display: true, text: "% of the cold run's time" }, ticks: { callback: function (v) { return v + "%"; } } },
                  y: { stacked: true } } }
    });
    var pts = (cache.points || []);
    if (pts.length) {
      var c3 = card(grid, "what-if: part of the dataset in the page cache", "predicted samples/s with that share of the dataset in the page " +
        "cache (uncached samples read from disk, cached ones from memory)" + (cache.basis ? "; " + cache.basis : "") + "; dashed: ingestion and prep rates");
      makeChart(c3.canvas, {
        type: "scatter",
        data: { datasets: [{ label: "samples/s", data: pts.map(function (p) { return { x: 100 * p.cached_share, y: p.samples_per_s }; }),
          showLine: true, borderColor: color(2), backgroundColor: color(2), pointRadius: 3, fill: false }] },
        options: { parsing: false, plugins: { legend: { display: false }, tooltip: { callbacks: { label: function (it) { return sig(it.parsed.x, 3) + "% cached: " + rate(it.parsed.y); } } } },
          scales: { x: { min: 0, max: 100, title: { display: true, text: "% of the dataset cached" }, ticks: { callback: function (v) { return v + "%"; } } },
                    y: { min: 0, suggestedMax: 1.1 * Math.max(d.ingestion_rate || 0, d.prep_rate || 0), title: { display: true, text: "samples/s" } } } },
        plugins: [referenceLines("y", [{ value: d.ingestion_rate, color: "#1d2330", label: "ingestion " + rate(d.ingestion_rate) },
                                       { value: d.prep_rate, color: STALL_COLORS.moderately, label: "prep " + rate(d.prep_rate) }])]
      });
    }
    var wk = wi.workers;
    if (wk && wk.predicted && wk.predicted.length) {
      var measured = [];
      legs.forEach(function (l) {
        var prefix = "warm-" + wk.key + "-";
        if (l.indexOf(prefix) !== 0) return;
        var w = Number(l.slice(prefix.length));
        if (isFinite(w) && runs[l].time_s > 0) measured.push({ x: w, y: n * A.batch_size / runs[l].time_s, leg: l });
      });
      var c4 = card(grid, "what-if: loader workers (" + wk.key + ")", sig(wk.per_worker_rate, 4) + " samples/s per worker from " + wk.fitted_runs +
        " prep-bound run" + (wk.fitted_runs === 1 ? "" : "s") + "; " + (wk.workers_to_keep_up > 0 ? wk.workers_to_keep_up + " workers keep up with the step" :
        "no worker count up to the " + wk.cores + " cores keeps up") + "; dashed: the ingestion rate");
      makeChart(c4.canvas, {
        type: "scatter",
        data: { datasets: [
          { label: "predicted", data: wk.predicted.map(function (p) { return { x: p.workers, y: p.samples_per_s }; }), showLine: true,
            borderColor: color(4), backgroundColor: color(4), pointRadius: 2, fill: false },
          { label: "measured", data: measured, pointRadius: 5, pointStyle: "rectRot", backgroundColor: color(1), borderColor: color(1) }] },
        options: { parsing: false, plugins: { tooltip: { callbacks: { label: function (it) { return it.dataset.label + ", " + it.parsed.x + " workers: " + rate(it.parsed.y); } } } },
          scales: { x: { min: 0, title: { display: true, text: "loader workers" }, ticks: { callback: function (v) { return Number.isInteger(v) ? v : ""; } } },
                    y: { min: 0, suggestedMax: 1.1 * (d.ingestion_rate || 0), title: { display: true, text: "samples/s" } } } },
        plugins: [referenceLines("y", [{ value: d.ingestion_rate, color: "#1d2330", label: "ingestion " + rate(d.ingestion_rate) }])]
      });
    } else if (wk && wk.note) {
      add(box, el("p", { class: "muted", text: "Loader workers (" + wk.key + "): " + wk.note }));
    }
  }

  function runPage() {
    var run = DATA.run;
    runHeader(run);
    var s = section("Statistics", "statistics");
    if (!DATA.stats.length) {
      add(s, el("p", { class: "muted", id: "no-regions", text: "No regions were recorded in this run" + (run.in_progress ? " yet." : ".") }));
    } else {
      statsTable(s, DATA.stats);
      histogramCharts(section("Distributions", "distributions"), DATA.histograms);
    }
    var range = timeRange();
    if (DATA.stalls || DATA.stalls_analysis) {
      var st = section("Data stalls", "stalls");
      if (DATA.stalls) runStallsSection(st, DATA.stalls, range);
      if (DATA.stalls_analysis) {
        add(st, el("h3", { text: "Differential analysis (DS-Analyzer's method)" }));
        analysisSection(st, DATA.stalls_analysis, DATA.stalls_analysis.leg);
      }
    }
    if (DATA.series.length) {
      var ts = section("Region times over the run", "series");
      add(ts, el("p", { class: "muted", text: "Each region at its start time, on the same time axis as the hardware metrics below: warm-up, drift and spikes." }));
      seriesCharts(ts, DATA.series, range);
    }
    hardwareCharts(section("Hardware", "hardware"), DATA.hardware, range);
    if (DATA.rank_stats.length) rankCharts(section("Ranks", "ranks"), DATA.rank_stats);
    if (DATA.stragglers) stragglerCharts(section("Slowest rank per step", "stragglers"), DATA.stragglers);
    if (DATA.metrics.length) metricCharts(section("Metrics", "metrics"), DATA.metrics);
  }

  // ---- study page (several runs, a sweep, a scaling study) -----------------
  function studyPage() {
    var runs = DATA.runs;
    var head = add(app, el("header", { class: "top" }));
    add(head, el("h1", { text: DATA.title }));
    var counts = {};
    runs.forEach(function (r) { counts[r.status] = (counts[r.status] || 0) + 1; });
    add(head, el("span", { class: "sub", text: runs.length + " runs: " + Object.keys(counts).map(function (k) { return counts[k] + " " + k; }).join(", ") +
      (DATA.sweeps.length ? " · sweep " + DATA.sweeps.join(", ") : "") }));
    runs.forEach(function (r) {  // damage check_run found: a run left out, or read with a warning
      if (r.error) add(app, el("div", { class: "banner note run-skipped", text: "Skipped " + (r.dir || r.name) + ": " + r.error }));
      (r.warnings || []).forEach(function (w) { add(app, el("div", { class: "banner note run-warning", text: "Warning: " + w })); });
    });
    var keys = DATA.keys.map(function (k) { return k.key + " · " + k.device; });
    function statOf(run, keyIndex, field) {
      if (keyIndex < 0) return null;
      var k = DATA.keys[keyIndex];
      var s = (run.stats || []).filter(function (x) { return x.key === k.key && x.device === k.device; })[0];
      return s ? s[field] : null;
    }
    var state = { key: Math.max(0, DATA.keys.findIndex(function (k) { return k.key === "BATCH" && k.device === "CPU"; })), stat: "median" };
    if (!DATA.keys.length) state.key = -1;
    var sRuns = section("Runs", "runs");
    var controls = add(sRuns, el("div", { class: "controls" }));
    add(controls, el("label", { text: "key" }));
    var keySel = add(controls, el("select", { id: "key-select" }));
    keys.forEach(function (k, i) { var o = add(keySel, el("option", { value: String(i), text: k })); if (i === state.key) o.selected = true; });
    add(controls, el("label", { text: "statistic" }));
    var statSel = add(controls, el("select", { id: "stat-select" }));
    ["median", "mean", "p95", "p99", "min", "max", "total", "count"].forEach(function (k) { add(statSel, el("option", { value: k, text: k })); });
    add(controls, el("label", { text: "filter" }));
    var filterBox = add(controls, el("input", { id: "filter", type: "search", placeholder: "text, or param=value" }));
    var selected = {};
    runs.slice(0, 4).forEach(function (r, i) { if (r.stats && r.stats.length) selected[i] = true; });
    runs.forEach(function (r, i) { r._i = i; });
    function fmtStat(v) { return state.stat === "count" ? count(v) : seconds(v); }
    var cols = [
      { label: "compare", nosort: true, get: function () { return null; }, cell: function (r, td) {
          var box = add(td, el("input", { type: "checkbox" }));
          box.checked = !!selected[r._i];
          box.addEventListener("change", function () { selected[r._i] = box.checked; drawCompare(); });
        } },
      { label: "run", text: true, get: function (r) { return r.name || r.job || r.id; }, tip: function (r) { return r.dir || ""; } },
      { label: "status", text: true, get: function (r) { return r.status; }, cell: function (r, td) { td.appendChild(badge(r.status)); if (r.error) td.title = r.error; } },
      { label: "duration", field: "duration_s", get: function (r) { return r.duration_s; }, fmt: duration }]
      .concat(DATA.params.map(function (p) {
        return { label: p, text: true, get: function (r) { var v = (r.params || {})[p]; var n = Number(v); return v !== undefined && v !== "" && isFinite(n) ? n : v; },
                 fmt: function (v, r) { var x = (r.params || {})[p]; return x === undefined ? "–" : x; } };
      }))
      .concat(DATA.keys.map(function (k, i) {
        return { label: k.key + " " + k.device, title: "the chosen statistic of " + k.key + " on the " + k.device + " (all rows of all ranks)",
                 field: k.key + "." + k.device, get: function (r) { return statOf(r, i, state.stat); }, fmt: fmtStat,
                 tip: function (r) { var lo = statOf(r, i, "median_ci_low"), hi = statOf(r, i, "median_ci_high");
                   return "n = " + count(statOf(r, i, "count")) + "; median " + seconds(statOf(r, i, "median")) + ", 95% CI " + seconds(lo) + " – " + seconds(hi); } };
      }));
    var runTable = table(sRuns, cols, runs, { cls: "runs", rowAttrs: function (r, tr) { tr.setAttribute("data-run", r.id || r.job || ""); } });
    add(sRuns, el("div", { class: "muted", text: "Click a header to sort. Statistics in seconds over every region row of every rank; hover a cell for n and the 95% CI of the median." }));
    function applyFilter() {
      var q = filterBox.value.trim().toLowerCase();
      if (!q) { runTable.setFilter(null); return; }
      var m = q.match(/^([^=<>]+)=(.*)$/);
      runTable.setFilter(function (r) {
        if (m) { var v = (r.params || {})[m[1].trim()]; return v !== undefined && String(v).toLowerCase() === m[2].trim(); }
        return JSON.stringify([r.name, r.job, r.status, r.params, r.id]).toLowerCase().indexOf(q) >= 0;
      });
    }
    filterBox.addEventListener("input", applyFilter);

    (DATA.stalls_analyses || []).forEach(function (a, i) {
      analysisSection(section("Data stalls: differential analysis" + (DATA.stalls_analyses.length > 1 ? " " + a.dir : ""),
                              i ? "stalls-analysis-" + i : "stalls-analysis"), a, "");
    });

    // The chosen key against each parameter.
    var sParam = section("Key against each parameter", "by-param");
    var paramGrid = add(sParam, el("div", { class: "grid" }));
    var paramCharts = [];
    // A param with one value over every run says nothing about the key: listed, not drawn.
    var varying = DATA.params.filter(function (p) {
      var seen = {};
      runs.forEach(function (r) { seen[String((r.params || {})[p])] = true; });
      return Object.keys(seen).length > 1;
    });
    var constant = DATA.params.filter(function (p) { return varying.indexOf(p) < 0; });
    if (constant.length && varying.length) {
      add(sParam, el("p", { class: "muted", text: "The same in every run: " + constant.map(function (p) {
        return p + " = " + ((runs[0] || {}).params || {})[p]; }).join(", ") + "." }));
    }
    varying.forEach(function (p, pi) {
      var c = card(paramGrid, p, "");
      var values = runs.map(function (r) { return (r.params || {})[p]; });
      var numeric = values.every(function (v) { return v !== undefined && v !== "" && isFinite(Number(v)); });
      var cats = [];
      values.forEach(function (v) { v = v === undefined ? "(none)" : v; if (cats.indexOf(v) < 0) cats.push(v); });
      if (!numeric) cats.sort();
      var logX = numeric && values.every(function (v) { return Number(v) > 0; }) && spread(values.map(Number)) >= 8;
      var chart = makeChart(c.canvas, {
        type: "scatter", data: { datasets: [] },
        options: { parsing: false, plugins: { tooltip: { callbacks: { label: function (it) { return (it.raw.run || "") + ": " + fmtStat(it.parsed.y); } } } },
          scales: { x: numeric ? { type: logX ? "logarithmic" : "linear", title: { display: true, text: p } }
                               : { type: "category", labels: cats, offset: true, title: { display: true, text: p } },
                    y: { ticks: { callback: function (v) { return fmtStat(v); } } } } }
      });
      paramCharts.push({ chart: chart, param: p, numeric: numeric, caption: c.caption });
    });
    if (!DATA.params.length) add(sParam, el("p", { class: "muted", text: "The runs have no params." }));
    else if (!varying.length) add(sParam, el("p", { class: "muted", text: "No param varies across the runs." }));
    function drawParams() {
      paramCharts.forEach(function (pc) {
        var pts = [], ci = [], n = 0;
        runs.forEach(function (r) {
          var v = statOf(r, state.key, state.stat);
          var raw = (r.params || {})[pc.param];
          if (!isNum(v)) return;
          var x = pc.numeric ? Number(raw) : (raw === undefined ? "(none)" : raw);
          pts.push({ x: x, y: v, run: r.name || r.job });
          n++;
          if (state.stat === "median") {
            var lo = statOf(r, state.key, "median_ci_low"), hi = statOf(r, state.key, "median_ci_high");
            if (isNum(lo) && isNum(hi)) { ci.push({ x: x, y: lo }, { x: x, y: hi }, { x: x, y: null }); }
          }
        });
        pc.chart.data.datasets = [
          { label: keys[state.key] + " " + state.stat, data: pts, pointRadius: 4, backgroundColor: color(0, 0.8), borderColor: color(0) },
          { type: "line", label: "95% CI of the median", data: ci, borderColor: color(0, 0.5), borderWidth: 2, pointRadius: 0, spanGaps: false, fill: false }];
        pc.chart.update();
        pc.caption.textContent = n + " runs with " + (keys[state.key] || "the key");
      });
    }

    // Runs side by side.
    var sCmp = section("Runs side by side", "compare");
    add(sCmp, el("p", { class: "muted", text: "The runs ticked in the table: the median of every key (with its 95% CI), and the chosen key over each run (rolling median, by position in the run)." }));
    var cmpGrid = add(sCmp, el("div", { class: "grid" }));
    var cmpBars = card(cmpGrid, "median of every key", "", true);
    var cmpTrend = card(cmpGrid, "chosen key over each run", "", true);
    var barChart = makeChart(cmpBars.canvas, { type: "bar", data: { labels: keys, datasets: [] },
      options: { plugins: { tooltip: { callbacks: { label: function (it) { return it.dataset.label + ": " + seconds(it.raw); } } } },
        scales: { y: { type: "logarithmic", ticks: { callback: secondsTicks } } } } });
    var trendChart = makeChart(cmpTrend.canvas, { type: "line", data: { datasets: [] },
      options: { parsing: false, scales: { x: { type: "linear", min: 0, max: 100, title: { display: true, text: "% of the run's regions" } },
        y: { ticks: { callback: secondsTicks } } } } });
    function drawCompare() {
      var chosen = runs.filter(function (r) { return selected[r._i]; });
      barChart.data.datasets = chosen.map(function (r, i) {
        return { label: r.name || r.job, data: DATA.keys.map(function (_, ki) { return statOf(r, ki, "median"); }), backgroundColor: color(i, 0.75) };
      });
      barChart.update();
      trendChart.data.datasets = chosen.map(function (r, i) {
        var k = DATA.keys[state.key];
        var s = k && (r.stats || []).filter(function (x) { return x.key === k.key && x.device === k.device; })[0];
        if (!s) return { label: r.name || r.job, data: [] };
        var n = Math.max(1, s.count - 1);
        return { label: r.name || r.job, data: s.trend.x.map(function (x, j) { return { x: 100 * x / n, y: s.trend.median[j] }; }),
                 borderColor: color(i), backgroundColor: color(i), pointRadius: 0, borderWidth: 1.4, fill: false };
      });
      trendChart.update();
      cmpBars.caption.textContent = chosen.length + " runs ticked";
      cmpTrend.caption.textContent = keys[state.key] ? keys[state.key] + ", rolling median" : "";
    }

    keySel.addEventListener("change", function () { state.key = Number(keySel.value); runTable.render(); drawParams(); drawCompare(); });
    statSel.addEventListener("change", function () { state.stat = statSel.value; runTable.render(); drawParams(); });
    drawParams();
    drawCompare();
    scalingSection(DATA.scaling);
  }

  function scalingSection(sc) {
    var s = section("Scaling study", "scaling");
    if (!sc.parameter) {
      add(s, el("p", { class: "muted", id: "no-scaling", text: "No scaling study: " + (sc.why_none || "no parameter") +
        ". `trainscope report --scaling PARAM` chooses the parameter." }));
      return;
    }
    var p = sc.parameter;
    add(s, el("p", { class: "muted", text: "Each key's mean time per run against " + p + " (runs with equal " + p +
      " are repetitions; ranks averaged), fitted with trainscope's scaling modeler (Extra-P's PMNF, as `trainscope model`). " +
      "The band is the bootstrap 90% prediction band (with fewer than 5 values of " + p + ", the t prediction interval of the few points where that is wider: such a fit is no evidence of the scaling); dashed: extrapolated past the largest measured " + p + "." }));
    sc.models.forEach(function (m) {
      var box = add(s, el("div", { class: "card scaling-model" }));
      add(box, el("div", { class: "title", text: m.key + (m.group ? " [" + m.group + "]" : "") + " · " + m.device }));
      if (m.group) add(box, el("div", { class: "muted", text: "One model per value of the params that differ between runs at one " + p +
        " (as `trainscope model --by`): this one for " + m.group + "." }));
      (m.warnings || []).forEach(function (w) { add(box, el("div", { class: "muted scaling-warning", text: "Left out: " + w })); });
      if (m.error) { add(box, el("p", { class: "muted", text: "No model: " + m.error })); return; }
      add(box, el("div", { class: "caption scaling-points", text: "Fitted to " + m.points_used + " points (" + m.runs_used + " runs)" +
        ((m.warnings || []).length ? "; " + m.warnings.length + " left out (above)" : "") }));
      var fit = m.model.models[0];  // the Model JSON document, as `trainscope model --json` writes it
      add(box, el("div", { class: "formula", text: m.key + "(" + p + ") = " + fit.formula }));
      add(box, el("div", { class: "caption", text: "SMAPE " + sig(fit.costs.smape, 3) + "%, adjusted R² " + sig(fit.costs.ar2, 4) +
        ", RSS " + sig(fit.costs.rss, 3) + (fit.warnings.length ? " · " + fit.warnings.join("; ") : "") }));
      var grid = add(box, el("div", { class: "grid" }));
      var c = card(grid, "model and measurements", "", true);
      var measured = [], spreadLines = [];
      m.points.forEach(function (pt) {
        pt.values.forEach(function (v) { measured.push({ x: pt.x, y: v }); });
        var lo = Math.min.apply(null, pt.values), hi = Math.max.apply(null, pt.values);
        spreadLines.push({ x: pt.x, y: lo }, { x: pt.x, y: hi }, { x: pt.x, y: null });
      });
      var ds = [];
      if (m.curve) {
        ds.push({ type: "line", label: "band low", data: points(m.curve.x, m.curve.lower), borderWidth: 0, pointRadius: 0, fill: false, backgroundColor: color(0, 0.15) });
        ds.push({ type: "line", label: "90% band", data: points(m.curve.x, m.curve.upper), borderWidth: 0, pointRadius: 0, fill: "-1", backgroundColor: color(0, 0.15) });
        ds.push({ type: "line", label: "model", data: points(m.curve.x, m.curve.y), borderColor: color(0), borderWidth: 2, pointRadius: 0, fill: false,
                  segment: { borderDash: function (ctx) { return ctx.p0.parsed.x >= m.max_measured ? [6, 4] : undefined; } } });
      }
      ds.push({ type: "line", label: "repetition spread", data: spreadLines, borderColor: "#1d2330", borderWidth: 1.5, pointRadius: 0, spanGaps: false, fill: false });
      ds.push({ type: "scatter", label: "measured", data: measured, pointRadius: 3.5, backgroundColor: color(1), borderColor: color(1) });
      makeChart(c.canvas, { type: "scatter", data: { datasets: ds },
        options: { parsing: false,
          scales: { x: { type: "logarithmic", title: { display: true, text: p } }, y: { ticks: { callback: secondsTicks }, title: { display: true, text: "mean " + m.key } } } } });
      if (!sc.views) {
        add(box, el("p", { class: "muted scaling-views-off", text: "Speedup, efficiency and cost are drawn only against a parameter that splits a fixed amount of work " +
          "(ranks, GPUs, nodes), when you name it: trainscope report ... --scaling " + p + "." }));
        return;
      }
      var ms = m.measured_scaling, md = m.modeled_scaling;
      var c2 = card(grid, "speedup and efficiency against " + p, ms && ms.error ? "measured: " + ms.error : "", true);
      var ds2 = [];
      if (md && !md.error) {
        ds2.push({ type: "line", label: "speedup (model)", data: points(md.resource, md.speedup), borderColor: color(2), pointRadius: 0, yAxisID: "y", fill: false });
        ds2.push({ type: "line", label: "efficiency (model)", data: points(md.resource, md.efficiency), borderColor: color(4), borderDash: [4, 3], pointRadius: 0, yAxisID: "y1", fill: false });
      }
      if (ms && !ms.error) {
        ds2.push({ type: "scatter", label: "speedup (measured)", data: points(ms.resource, ms.speedup), backgroundColor: color(2), yAxisID: "y", pointRadius: 4 });
        ds2.push({ type: "scatter", label: "efficiency (measured)", data: points(ms.resource, ms.efficiency), backgroundColor: color(4), yAxisID: "y1", pointRadius: 4, pointStyle: "rect" });
      }
      makeChart(c2.canvas, { type: "scatter", data: { datasets: ds2 },
        options: { parsing: false, scales: { x: { type: "logarithmic", title: { display: true, text: p } },
          y: { position: "left", title: { display: true, text: "speedup" } },
          y1: { position: "right", min: 0, grid: { drawOnChartArea: false }, title: { display: true, text: "efficiency" } } } } });
      var c3 = card(grid, "cost (time × " + p + ")", "", true);
      var ds3 = [];
      if (md && !md.error) ds3.push({ type: "line", label: "cost (model)", data: points(md.resource, md.cost), borderColor: color(5), pointRadius: 0, fill: false });
      if (ms && !ms.error) ds3.push({ type: "scatter", label: "cost (measured)", data: points(ms.resource, ms.cost), backgroundColor: color(5), pointRadius: 4 });
      makeChart(c3.canvas, { type: "scatter", data: { datasets: ds3 },
        options: { parsing: false, scales: { x: { type: "logarithmic", title: { display: true, text: p } }, y: { title: { display: true, text: "cost (s × " + p + ")" } } } } });
    });
  }

  // ---- comparison page (trainscope report A B --compare) --------------------
  // DATA.comparison is the document of `trainscope compare --json`; DATA.charts, per pair,
  // the per-step series of its step key on each side (envelopes, as the run page's).
  // Tones: a time slower is bad (red), faster good (green); same grey, inconclusive amber;
  // a metric higher or lower is good or bad by what it measures, else neutral (blue).
  var TONE_COLORS = { bad: "#c0362c", good: "#1a7f37", same: "#6e7781", unsure: "#b7860b", neutral: "#0969da" };
  var METRIC_BETTER = { "throughput": "higher", "data-wait": "lower" };
  function verdictTone(r) {
    if (r.verdict === "same") return "same";
    if (r.verdict === "slower") return "bad";
    if (r.verdict === "faster") return "good";
    if (r.verdict === "higher" || r.verdict === "lower") {
      var better = METRIC_BETTER[r.name];
      return !better ? "neutral" : better === r.verdict ? "good" : "bad";
    }
    return "unsure";
  }
  function hexAlpha(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16 & 255) + "," + (n >> 8 & 255) + "," + (n & 255) + "," + alpha + ")";
  }
  function change(ratio) { return isNum(ratio) ? (ratio >= 1 ? "+" : "") + (100 * (ratio - 1)).toFixed(1) + "%" : "–"; }
  function ratioInterval(r) { return isNum(r.low) && isNum(r.high) ? "[" + change(r.low) + ", " + change(r.high) + "]" : "–"; }
  function pText(p) { return !isNum(p) ? "–" : p < 0.001 ? "<0.001" : p.toFixed(3); }
  function rowName(r) { return r.name + (r.device === "GPU" ? " (GPU)" : ""); }
  function quantityValue(v, r) {
    if (r.kind !== "metric") return seconds(v);
    if (!isNum(v)) return "–";
    if (r.name === "throughput") return sig(v, 4) + "/s";
    if (r.name === "data-wait") return pct(v);
    return sig(v, 4);
  }
  function moreText(r) {
    var more = Math.max(r.more_a || 0, r.more_b || 0);
    return r.verdict === "inconclusive" && more > 0 ? " (about " + count(more) + " more " + r.unit + " a side would decide)" : "";
  }
  function verdictSpan(r) {
    var node = el("span", { class: "verdict tone-" + verdictTone(r), text: r.verdict + moreText(r) });
    if (r.reason) node.title = r.reason;
    return node;
  }
  function sideRuns(dirs) { return dirs.length === 1 ? dirs[0] : count(dirs.length) + " runs"; }
  function observations(o) {
    if (!(o.n_a > 0)) return "";
    if (o.unit === "runs") return count(o.n_a) + " runs of A and " + count(o.n_b) + " of B (each run's median after its warm-up)";
    return count(o.n_a) + " steps of A and " + count(o.n_b) + " of B after warm-up (dropped " + count(o.warmup_a) + " and " + count(o.warmup_b) + ")";
  }
  // A shaded stretch of an axis behind the datasets (the band of `same`), labelled at its top.
  function shadedBand(axis, from, to, fill, label) {
    return { id: "shaded-band", beforeDatasetsDraw: function (chart) {
      var scale = chart.scales[axis], area = chart.chartArea, ctx = chart.ctx;
      if (!scale) return;
      var p0 = scale.getPixelForValue(from), p1 = scale.getPixelForValue(to);
      if (!isFinite(p0) || !isFinite(p1)) return;
      ctx.save();
      ctx.fillStyle = fill;
      if (axis === "x") {
        var left = Math.max(area.left, Math.min(p0, p1)), right = Math.min(area.right, Math.max(p0, p1));
        ctx.fillRect(left, area.top, Math.max(right - left, 1), area.bottom - area.top);
        if (label) {  // right of the band, or left of it where the chart ends
          ctx.font = "11px system-ui, sans-serif"; ctx.fillStyle = "#5d6675"; ctx.textAlign = "left";
          var w = ctx.measureText(label).width;
          ctx.fillText(label, right + 3 + w <= area.right ? right + 3 : Math.max(area.left, left - 3 - w), area.top + 11);
        }
      } else {
        var top = Math.max(area.top, Math.min(p0, p1)), bottom = Math.min(area.bottom, Math.max(p0, p1));
        ctx.fillRect(area.left, top, area.right - area.left, Math.max(bottom - top, 1));
      }
      ctx.restore();
    } };
  }

  // Seconds on a linear axis; on a log axis only at 1, 2 and 5 of each decade.
  function logFriendlySeconds(v) {
    if (this.type !== "logarithmic") return seconds(v);
    var m = v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9));
    return [1, 2, 5].some(function (k) { return Math.abs(m - k) < 1e-6; }) ? seconds(v) : "";
  }

  // The largest 1, 2 or 5 times a power of ten at or below every positive value (a log axis's start).
  function niceFloor(values) {
    var lo = Infinity;
    values.forEach(function (v) { if (isNum(v) && v > 0) lo = Math.min(lo, v); });
    if (lo === Infinity) return undefined;
    var p = Math.pow(10, Math.floor(Math.log10(lo)));
    return [5, 2, 1].map(function (k) { return k * p; }).filter(function (v) { return v <= lo; })[0] || p;
  }

  // The step key's time per step on each side, overlaid (x: the step's index on its side).
  function compareSeriesChart(parent, ch, pair) {
    var row = ch.overall ? pair.overall : pair.rows.filter(function (r) {
      return r.kind === "region" && r.name === ch.name && r.device === ch.device; })[0] || {};
    var sides = [["A", ch.a, 0], ["B", ch.b, 1]];
    var caption = sides.map(function (s) {
      return s[0] + ": " + count(s[1].rows) + " steps" + (s[1].runs > 1 ? " of " + s[1].runs + " runs" : "") +
        (s[1].bucket > 1 ? " in " + s[1].x.length + " buckets of up to " + count(s[1].bucket) : "");
    }).join(" · ") + ". Shaded: min–max of each bucket (every spike kept), line: rolling median.";
    var lines = [];
    if (row.unit === "steps") {
      if (row.warmup_a > 0) lines.push({ value: row.warmup_a, color: color(0), label: "A warm-up ends" });
      if (row.warmup_b > 0) lines.push({ value: row.warmup_b, color: color(1), label: "B warm-up ends" });
      if (lines.length) caption += " Dashed: the end of each side's warm-up (dropped before comparing).";
    }
    sides.forEach(function (s) {
      (s[1].run_starts || []).slice(1).forEach(function (x) { lines.push({ value: x, color: color(s[2], 0.6), dash: [2, 3], width: 1 }); });
    });
    if (ch.a.runs > 1 || ch.b.runs > 1) caption += " A side's runs come one after another (dotted: where each starts).";
    var c = card(parent, ch.name + (ch.device === "GPU" ? " (GPU)" : "") + " per step: A and B" +
      (ch.overall ? "" : " (the largest effect; no step key)"), caption, true);
    var ds = [], all = [];
    sides.forEach(function (s) {
      var e = s[1], ci = s[2];
      all = all.concat(e.lo, e.hi);
      if (e.bucket > 1) {
        ds.push({ label: s[0] + " min", data: points(e.x, e.lo), borderWidth: 0, pointRadius: 0,
                  backgroundColor: color(ci, 0.16), fill: false });
        ds.push({ label: s[0] + " min–max", data: points(e.x, e.hi), borderWidth: 0.5, pointRadius: 0,
                  borderColor: color(ci, 0.4), backgroundColor: color(ci, 0.16), fill: "-1" });
      } else {
        ds.push({ label: s[0] + " per step", data: points(e.x, e.hi), borderWidth: 0.7, pointRadius: e.rows < 300 ? 1.2 : 0,
                  borderColor: color(ci, 0.4), backgroundColor: color(ci, 0.4), fill: false });
      }
      ds.push({ label: s[0] + " rolling median", data: points(e.x, e.median), borderWidth: 2, pointRadius: 0,
                borderColor: color(ci), backgroundColor: color(ci), fill: false });
    });
    var logY = spread(all) > 5;
    makeChart(c.canvas, {
      type: "line", data: { datasets: ds },
      options: { parsing: false, spanGaps: true, interaction: { mode: "nearest", axis: "x", intersect: false },
        plugins: { tooltip: { callbacks: { label: function (it) { return it.dataset.label + ": " + seconds(it.parsed.y); },
                                           title: function (items) { return "step " + count(items[0].parsed.x); } } } },
        scales: { x: { type: "linear", min: 0, max: Math.max(1, Math.max(ch.a.rows, ch.b.rows) - 1),
                       ticks: { includeBounds: false }, title: { display: true, text: "step (index on its side)" } },
                  // Log once spikes would flatten the medians the verdict is about.
                  y: { type: logY ? "logarithmic" : "linear", min: logY ? niceFloor(all) : undefined,
                       ticks: { callback: logFriendlySeconds, autoSkip: !logY },
                       title: { display: true, text: ch.name + " time" } } } },
      plugins: [referenceLines("x", lines)]
    });
  }

  // Every row's B/A with its interval, on one axis with the band of `same`.
  function forestChart(parent, pair, doc) {
    var rows = pair.rows.slice();
    var o = pair.overall;
    if (!rows.some(function (r) { return r.name === o.name && r.device === o.device && r.kind === o.kind; })) {
      rows.push(Object.assign({}, o, { name: "overall: " + o.name }));
    }
    rows = rows.filter(function (r) { return isNum(r.ratio); });
    if (!rows.length) return;
    var t = doc.threshold, lo = 1 / (1 + t), hi = 1 + t;
    var vals = [lo, hi];
    rows.forEach(function (r) { [r.ratio, r.low, r.high].forEach(function (v) { if (isNum(v) && v > 0) vals.push(v); }); });
    var min = Math.min.apply(null, vals), max = Math.max.apply(null, vals);
    var logX = max / min > 4;
    var pad = (max - min) * 0.08;
    var conf = sig(100 * doc.confidence, 3);
    var c = card(parent, "B/A of every quantity", "Diamond: B/A; bar: its " + conf + "% interval, coloured by verdict; " +
      "shaded: ±" + sig(100 * t, 3) + "% (an interval wholly inside is `same`); line: no change.", true);
    c.canvas.parentNode.style.height = Math.max(240, 70 + 34 * rows.length) + "px";
    var colors = rows.map(function (r) { return TONE_COLORS[verdictTone(r)]; });
    makeChart(c.canvas, {
      type: "bar",
      data: { labels: rows.map(rowName), datasets: [
        { label: conf + "% interval", data: rows.map(function (r) { return isNum(r.low) && isNum(r.high) ? [r.low, r.high] : null; }),
          backgroundColor: colors.map(function (h) { return hexAlpha(h, 0.3); }), borderColor: colors, borderWidth: 1.2,
          borderSkipped: false, barPercentage: 0.5, categoryPercentage: 1 },
        { type: "line", label: "B/A", data: rows.map(function (r) { return r.ratio; }), showLine: false,
          pointStyle: "rectRot", pointRadius: 6, pointHoverRadius: 7, pointBackgroundColor: colors,
          pointBorderColor: "#1d2330", borderColor: "#1d2330", backgroundColor: "#1d2330" }] },
      options: { indexAxis: "y",
        plugins: { legend: { display: false }, tooltip: { callbacks: { label: function (it) {
          var r = rows[it.dataIndex];
          return "B/A " + change(r.ratio) + " " + ratioInterval(r) + " · " + r.verdict + " · p " + pText(r.p_value); } } } },
        scales: { x: { type: logX ? "logarithmic" : "linear", beginAtZero: false, min: logX ? min / 1.15 : undefined, max: logX ? max * 1.15 : undefined,
                       suggestedMin: logX ? undefined : Math.max(0, min - pad), suggestedMax: logX ? undefined : max + pad,
                       title: { display: true, text: "B/A as a change (left of the line: B lower or faster)" },
                       ticks: { maxTicksLimit: 9, callback: function (v) {
                         if (!logX) return change(v);
                         var m = v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9));
                         return [1, 2, 5].some(function (k) { return Math.abs(m - k) < 1e-6; }) ? change(v) : ""; } } },
                  y: { grid: { display: false }, ticks: { font: { size: 12 } } } } },
      plugins: [shadedBand("x", lo, hi, "rgba(110,119,129,0.16)", "same ±" + sig(100 * t, 3) + "%"),
                referenceLines("x", [{ value: 1, color: "#1d2330", dash: [], width: 1 }])]
    });
  }

  function pairSection(pair, ch, i, doc) {
    var s = section(pair.config ? "Configuration " + pair.config : "B against A", "pair-" + i);
    s.className = "cmp-pair";
    s.setAttribute("data-config", pair.config);
    var o = pair.overall, tone = verdictTone(o), conf = sig(100 * doc.confidence, 3);
    var head = add(s, el("div", { class: "cmp-head", id: "verdict-" + i, "data-verdict": o.verdict }));
    add(head, el("span", { class: "badge big tone-" + tone, text: o.verdict }));
    var ratio = add(head, el("span", { class: "cmp-change tone-" + tone, "data-field": "overall-ratio", text: "B/A " + change(o.ratio) }));
    if (isNum(o.ratio)) ratio.setAttribute("data-value", String(o.ratio));
    if (isNum(o.low) && isNum(o.high)) add(head, el("span", { class: "cmp-interval", text: ratioInterval(o) + " (" + conf + "% interval)" }));
    if (isNum(o.p_value)) add(head, el("span", { class: "muted", text: "p " + pText(o.p_value) }));
    var basis = add(s, el("div", { class: "cmp-basis" }));
    add(basis, el("b", { text: "overall: " }));
    basis.appendChild(document.createTextNode(pair.overall_basis + (observations(o) ? " · " + observations(o) : "")));
    if (/^inconclusive/.test(o.verdict) && o.reason) add(s, el("div", { class: "cmp-reason", text: o.reason }));
    add(s, el("div", { class: "muted", text: "A: " + sideRuns(pair.runs_a) + " · B: " + sideRuns(pair.runs_b),
                       title: "A: " + pair.runs_a.join("\n") + "\nB: " + pair.runs_b.join("\n") }));
    (pair.warnings || []).forEach(function (w) { add(s, el("div", { class: "banner note cmp-warning", text: "Warning: " + w })); });
    table(s, [
      { label: "quantity", text: true, field: "name", get: rowName },
      { label: "A median", field: "median_a", get: function (r) { return r.median_a; }, fmt: quantityValue },
      { label: "B median", field: "median_b", get: function (r) { return r.median_b; }, fmt: quantityValue },
      { label: "B/A", field: "ratio", get: function (r) { return r.ratio; }, fmt: change },
      { label: conf + "% interval", field: "low", get: function (r) { return r.low; }, fmt: function (v, r) { return ratioInterval(r); } },
      { label: "p", field: "p_value", get: function (r) { return r.p_value; }, fmt: pText },
      { label: "n A / B", field: "n_a", get: function (r) { return r.n_a; }, fmt: function (v, r) { return count(r.n_a) + " / " + count(r.n_b) + " " + r.unit; } },
      { label: "verdict", text: true, get: function (r) { return r.verdict; }, cell: function (r, td) {
          td.setAttribute("data-field", "verdict"); td.appendChild(verdictSpan(r)); } }],
      pair.rows, { cls: "cmp-rows", rowAttrs: function (r, tr) {
        tr.setAttribute("data-row", r.name); tr.setAttribute("data-device", r.device); tr.setAttribute("data-verdict", r.verdict); } });
    var notes = pair.rows.filter(function (r) { return r.note || (/^inconclusive/.test(r.verdict) && r.reason && r.name !== o.name); });
    if (notes.length) {
      var ul = add(s, el("ul", { class: "findings cmp-notes" }));
      notes.forEach(function (r) {
        if (r.note) add(ul, el("li", { class: "cmp-note", text: "Note: " + r.note }));
        if (/^inconclusive/.test(r.verdict) && r.reason && r.name !== o.name) add(ul, el("li", { text: rowName(r) + ": " + r.reason }));
      });
    }
    add(s, el("div", { class: "muted", text: "Rows by effect (the largest change first; click a header to sort). B/A: B's median over A's " +
      "(with several runs a side, the ratio of the geometric means of the runs' medians). Verdicts: same, the interval inside ±" +
      sig(100 * doc.threshold, 3) + "%; slower/faster (metrics: higher/lower), the interval wholly above/below 1; else inconclusive." }));
    var grid = add(s, el("div", { class: "grid two" }));
    if (ch) compareSeriesChart(grid, ch, pair);
    else add(grid, el("p", { class: "muted", text: "No region series on both sides to draw (a saved comparison without its data?)." }));
    forestChart(grid, pair, doc);
  }

  function comparePage() {
    var doc = DATA.comparison;
    var head = add(app, el("header", { class: "top" }));
    add(head, el("h1", { text: DATA.title }));
    add(head, el("span", { class: "sub", text: "trainscope compare: is B faster than A?" }));
    kv(app, [["A", doc.a.label + " (" + count(doc.a.runs.length) + (doc.a.runs.length === 1 ? " run)" : " runs)")],
             ["B", doc.b.label + " (" + count(doc.b.runs.length) + (doc.b.runs.length === 1 ? " run)" : " runs)")],
             ["verdicts", "same: the " + sig(100 * doc.confidence, 3) + "% interval of B/A inside ±" + sig(100 * doc.threshold, 3) +
                          "%; slower / faster: wholly above / below 1"]]);
    (doc.warnings || []).forEach(function (w) { add(app, el("div", { class: "banner note cmp-warning", text: "Warning: " + w })); });
    doc.pairs.forEach(function (pair, i) { pairSection(pair, (DATA.charts || [])[i], i, doc); });
    add(app, el("p", { class: "muted", text: "`trainscope compare " + DATA.inputs.map(quoteArg).join(" ") +
      "` prints the same table; docs/compare.md says how each number is made." }));
  }

  // ---- main -------------------------------------------------------------------
  document.title = DATA.title;
  if (DATA.kind === "run") runPage(); else if (DATA.kind === "compare") comparePage(); else studyPage();
  var foot = add(app, el("footer"));
  foot.textContent = "Written by " + DATA.generator + " with " + (DATA.chart_library || "Chart.js") +
    " (embedded; this page needs no network). Inputs: " + DATA.inputs.join(", ") +
    ". Time series show at most " + DATA.max_points + " points each; every statistic uses every row.";
  window.trainscopeCharts = charts;
  document.body.setAttribute("data-charts", String(charts.length));
  document.body.setAttribute("data-ready", "1");
})();
