// memtune report front end (docs/report.md): draws the page data (schema memtune.report/1)
// that `memtune report` embeds in #memtune-data. Charts with uPlot (the global `uPlot`);
// the timeline is downsampled to min/max per pixel column so 200k events stay fast.
(function () {
  'use strict';
  const t0 = performance.now();
  const data = JSON.parse(document.getElementById('memtune-data').textContent);
  const root = document.getElementById('report');
  const GB = 1e9;
  const COLORS = {
    allocated: '#2f6fdf', native: '#f08c00', expandable: '#2b8a3e', capacity: '#a61e4d',
    free: '#f8c9a0', block: '#2f6fdf', segment: '#1d232b',
    parameters: '#5470c6', gradients: '#91cc75', optimizer: '#fac858', activations: '#ee6666',
    logits: '#73c0de', transient: '#9a60b4', non_pytorch: '#8d99a6',
  };
  const PHASE_COLORS = {
    startup: '#adb5bd', forward: '#74c0fc', backward: '#ffa94d', recompute: '#b197fc',
    optimizer: '#63e6be', zero_grad: '#ced4da',
  };

  function gb(bytes) { return (bytes / GB).toFixed(2) + ' GB'; }
  // OOM messages print GiB: the diagnosis shows what they say.
  function gib(bytes) { return (bytes / 1073741824).toFixed(2) + ' GiB'; }
  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v; else if (k === 'style') e.style.cssText = v;
      else e.setAttribute(k, v);
    }
    for (const c of children || []) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    return e;
  }
  function section(id, title, note) {
    const s = el('section', { id: id }, [el('h2', { text: title })]);
    if (note) s.appendChild(el('p', { class: 'note', text: note }));
    root.appendChild(s);
    return s;
  }
  function stateText(s) { return { fits: 'fits', at_risk: 'at risk', oom: 'OOM' }[s] || s; }

  // ---- job: verdict per allocator mode ----
  function verdicts(est) {
    const s = section('verdicts', 'Verdict per allocator mode',
      'The simulated PyTorch caching allocator under the job\'s own setting and the other segment mode.');
    const cards = el('div', { class: 'cards' });
    for (const [mode, v] of Object.entries(est.verdict || {})) {
      const margin = v.margin_bytes >= 0 ? gb(v.margin_bytes) + ' to spare' : 'short by ' + gb(-v.margin_bytes);
      cards.appendChild(el('div', { class: 'card verdict', 'data-mode': mode }, [
        el('h3', { text: mode + (v.job_config ? ' (the job\'s)' : '') }),
        el('div', { class: 'state ' + v.state, text: stateText(v.state) }),
        el('div', { text: margin + ' on pipeline rank ' + v.pp_rank + ' (uncertainty ' + gb(v.uncertainty_bytes) + ')' }),
        el('div', { class: 'muted', text: 'PYTORCH_CUDA_ALLOC_CONF=' + (v.alloc_conf || '(unset)') }),
        el('div', { class: 'muted', text: (v.state === 'oom' ? 'fails at ' : 'peak at ') + (v.moment || '') }),
      ]));
    }
    if (!cards.children.length) cards.appendChild(el('p', { text: 'No allocator forecast for this job.' }));
    s.appendChild(cards);
    for (const a of est.advice || []) s.appendChild(el('p', { class: 'advice', text: 'Advice: ' + a.text }));
  }

  // ---- job: per-rank stacked bars ----
  function rankStacks(est) {
    const stages = (est.allocator && est.allocator.stages) || [];
    return est.ranks.map(function (r, i) {
      const kinds = {};
      for (const d of r.component_details) kinds[d.kind] = (kinds[d.kind] || 0) + d.bytes;
      const parts = Object.entries(kinds).map(([k, b]) => ({ key: k, bytes: b }));
      parts.push({ key: 'non_pytorch', bytes: r.non_pytorch_bytes || 0 });
      const st = stages[i];
      const out = [{ label: 'estimate', parts: parts }];
      if (st) {
        for (const run of [st.own, st.other]) {
          const mode = run.expandable_segments ? 'expandable' : 'native';
          out.push({ label: mode, parts: [
            { key: mode, bytes: run.reserved_bytes }, { key: 'non_pytorch', bytes: r.non_pytorch_bytes || 0 }] });
        }
      }
      return { rank: r.pp_rank, bars: out };
    });
  }
  function bars(est) {
    const s = section('bars', 'Per-rank memory against capacity',
      'Per pipeline rank: the estimate\'s allocated components, then peak reserved under each allocator mode, each with the memory outside PyTorch; the dashed line is the GPU capacity.');
    const stacks = rankStacks(est);
    const cap = (est.gpu && est.gpu.capacity_bytes) || 0;
    let top = cap;
    for (const r of stacks) for (const b of r.bars) top = Math.max(top, b.parts.reduce((a, p) => a + p.bytes, 0));
    top *= 1.05;
    const box = el('div', { class: 'bars' });
    for (let g = 0; g <= 4; ++g) {
      box.appendChild(el('div', { class: 'axis-tick', style: 'bottom:' + (g * 25) + '%', text: (top * g / 4 / GB).toFixed(0) + ' GB' }));
    }
    for (const r of stacks) {
      const group = el('div', { class: 'bar-group', 'data-rank': r.rank });
      for (const b of r.bars) {
        const bar = el('div', { class: 'bar', title: b.label });
        for (const p of b.parts) {
          bar.appendChild(el('div', { class: 'seg', title: b.label + ' ' + p.key + ': ' + gb(p.bytes),
            style: 'height:' + (100 * p.bytes / top) + '%;background:' + (COLORS[p.key] || '#999') }));
        }
        group.appendChild(bar);
      }
      group.appendChild(el('div', { class: 'bar-label', text: 'rank ' + r.rank }));
      box.appendChild(group);
    }
    if (cap > 0) {
      box.appendChild(el('div', { class: 'cap-line', style: 'bottom:' + (100 * cap / top) + '%' },
        [el('span', { text: 'capacity ' + gb(cap) + ' (' + (est.gpu.name || 'GPU') + ')' })]));
    }
    s.appendChild(box);
    const legend = el('div', { class: 'legend' });
    for (const k of ['parameters', 'gradients', 'optimizer', 'activations', 'logits', 'transient', 'non_pytorch', 'native', 'expandable']) {
      legend.appendChild(el('span', {}, [el('i', { style: 'background:' + COLORS[k] }), k === 'native' || k === 'expandable' ? 'reserved, ' + k : k.replace('_', ' ')]));
    }
    s.appendChild(legend);
  }

  // ---- timeline: min/max per pixel column ----
  function downsample(series, n, lo, hi, columns) {
    lo = Math.max(0, Math.floor(lo)); hi = Math.min(n - 1, Math.ceil(hi));
    const xs = [], ys = series.map(() => []);
    const push = function (x, vals) { xs.push(x); vals.forEach((v, k) => ys[k].push(v)); };
    const at = (i) => series.map((s) => (i < s.length ? s[i] / GB : null));
    if (lo > 0) push(0, at(0));  // the ends keep uPlot's auto range (double-click) whole
    const span = hi - lo + 1;
    if (span <= 2 * columns) {
      for (let i = lo; i <= hi; ++i) push(i, at(i));
    } else {
      const width = span / columns;
      for (let c = 0; c < columns; ++c) {
        const a = lo + Math.floor(c * width), b = Math.min(hi + 1, lo + Math.floor((c + 1) * width));
        const mins = [], maxs = [];
        for (const s of series) {
          let mn = Infinity, mx = -Infinity;
          const end = Math.min(b, s.length);
          for (let i = a; i < end; ++i) { const v = s[i]; if (v < mn) mn = v; if (v > mx) mx = v; }
          mins.push(end > a ? mn / GB : null); maxs.push(end > a ? mx / GB : null);
        }
        push(a, mins); push(a + width / 2, maxs);
      }
    }
    if (xs[xs.length - 1] < n - 1) push(n - 1, at(n - 1));
    return [xs].concat(ys);
  }

  function eventText(t, i) {
    const L = t.labels;
    if (!L || i < 0 || i >= t.events) return '';
    if (L.phase) {
      const parts = ['event ' + i, (L.op[i] ? 'free ' : 'alloc ') + gb(L.bytes[i]), 'iter ' + L.iteration[i],
        L.phase_names[L.phase[i]]];
      if (L.layer[i] >= 0) parts.push('layer ' + L.layer[i]);
      parts.push(L.tensor_names[L.tensor[i]]);
      return parts.join('  ');
    }
    return ['entry ' + i, L.action_names[L.action[i]], gb(L.bytes[i]), L.site_names[L.site[i]] || ''].join('  ');
  }

  function timeline(t, title, note) {
    const s = section('timeline', title, note);
    // Native last: drawn on top, it shows where it differs from expandable segments.
    const modes = t.modes.slice().reverse();
    const names = ['allocated'].concat(modes.map((m) => 'reserved ' + m.mode + (m.job_config ? ' (job)' : '') + (m.recorded ? ' (recorded)' : '')));
    const series = [t.allocated_bytes].concat(modes.map((m) => m.reserved_bytes));
    const n = t.events;
    const chartBox = el('div', { class: 'chart', id: 'timeline-chart' });
    const hover = el('div', { id: 'hover', text: 'Hover over the chart for the event; drag to zoom, double-click to zoom out.' });
    s.appendChild(chartBox); s.appendChild(hover);
    const width = Math.max(400, chartBox.clientWidth || 1100);
    const colors = [COLORS.allocated].concat(modes.map((m) => COLORS[m.mode]));
    let busy = false;
    const usable = t.usable_bytes || 0;
    const opts = {
      width: width, height: 360,
      scales: { x: { time: false }, y: { range: (u, mn, mx) => [0, Math.max(mx, usable / GB) * 1.05] } },
      axes: [{ label: 'event' }, { label: 'GB', size: 60 }],
      series: [{ label: 'event', value: (u, v) => (v == null ? '' : Math.round(v)) }].concat(names.map((name, k) => ({
        label: name, stroke: colors[k], width: k === 0 ? 1 : 2, fill: k === 0 ? 'rgba(47,111,223,0.12)' : undefined,
        value: (u, v) => (v == null ? '' : v.toFixed(2) + ' GB') }))),
      cursor: { drag: { x: true, y: false } },
      hooks: {
        setScale: [function (u, key) {
          if (key !== 'x' || busy) return;
          busy = true;
          u.setData(downsample(series, n, u.scales.x.min, u.scales.x.max, u.bbox.width / devicePixelRatio), false);
          busy = false;
        }],
        setCursor: [function (u) {
          const idx = u.cursor.idx;
          if (idx == null) return;
          const i = Math.round(u.data[0][idx]);
          const vals = names.map((name, k) => name + ' ' + (i < series[k].length ? gb(series[k][i]) : '—'));
          hover.textContent = eventText(t, i) + '\n' + vals.join('   ');
        }],
        drawClear: [function (u) { drawMarkers(u, t); }],
        draw: [function (u) { drawOoms(u, t); }],
      },
    };
    const plot = new uPlot(opts, downsample(series, n, 0, n - 1, width), chartBox);
    chartBox.dataset.events = n;
    return plot;
  }

  // Under the series: iteration lines, the phase strip and the capacity line.
  function drawMarkers(u, t) {
    const ctx = u.ctx, top = u.bbox.top, h = u.bbox.height, left = u.bbox.left, w = u.bbox.width;
    const xmin = u.scales.x.min, xmax = u.scales.x.max;
    const X = (i) => u.valToPos(i, 'x', true), Y = (v) => u.valToPos(v / GB, 'y', true);
    ctx.save();
    ctx.beginPath(); ctx.rect(left, top, w, h); ctx.clip();
    const phases = t.phases || [];
    for (let k = 0; k < phases.length; ++k) {
      const a = phases[k].start, b = k + 1 < phases.length ? phases[k + 1].start : t.events;
      if (b < xmin || a > xmax) continue;
      ctx.fillStyle = PHASE_COLORS[phases[k].phase] || '#ccc';
      ctx.fillRect(X(a), top, Math.max(1, X(b) - X(a)), 6 * devicePixelRatio);
    }
    ctx.strokeStyle = '#868e96'; ctx.setLineDash([4, 4]); ctx.fillStyle = '#495057';
    ctx.font = (11 * devicePixelRatio) + 'px sans-serif';
    for (const m of t.iterations || []) {
      if (m.index < xmin || m.index > xmax) continue;
      ctx.beginPath(); ctx.moveTo(X(m.index), top); ctx.lineTo(X(m.index), top + h); ctx.stroke();
      ctx.fillText(m.label, X(m.index) + 3, top + 18 * devicePixelRatio);
    }
    if (t.usable_bytes > 0) {
      ctx.strokeStyle = COLORS.capacity; ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.setLineDash([8 * devicePixelRatio, 4 * devicePixelRatio]);
      ctx.beginPath(); ctx.moveTo(left, Y(t.usable_bytes)); ctx.lineTo(left + w, Y(t.usable_bytes)); ctx.stroke();
      ctx.fillStyle = COLORS.capacity; ctx.textAlign = 'right';
      ctx.fillText('usable by PyTorch ' + gb(t.usable_bytes), left + w - 6, Y(t.usable_bytes) + 14 * devicePixelRatio);
      ctx.textAlign = 'left';
    }
    ctx.restore();
  }

  // Over the series: an X where a mode runs out of memory.
  function drawOoms(u, t) {
    const ctx = u.ctx, left = u.bbox.left, w = u.bbox.width;
    const X = (i) => u.valToPos(i, 'x', true), Y = (v) => u.valToPos(v / GB, 'y', true);
    ctx.save();
    ctx.font = (11 * devicePixelRatio) + 'px sans-serif';
    for (const m of t.modes) {  // each mode's reserved peak: a dot and its value
      if (m.peak_index < u.scales.x.min || m.peak_index > u.scales.x.max) continue;
      const x = X(m.peak_index), y = Y(m.peak_reserved_bytes), label = m.mode + ' peak ' + gb(m.peak_reserved_bytes);
      ctx.fillStyle = COLORS[m.mode];
      ctx.beginPath(); ctx.arc(x, y, 4 * devicePixelRatio, 0, 2 * Math.PI); ctx.fill();
      const room = x + ctx.measureText(label).width + 12 < left + w;
      ctx.textAlign = room ? 'left' : 'right';
      ctx.fillText(label, room ? x + 8 : x - 8, y + (m.mode === 'native' ? -6 : 14) * devicePixelRatio);
      ctx.textAlign = 'left';
    }
    for (const m of t.modes) {
      if (!m.oom) continue;
      const i = m.oom.index, v = m.reserved_bytes.length ? m.reserved_bytes[Math.min(i, m.reserved_bytes.length) - 1] || 0 : 0;
      const x = X(i), y = Y(v), r = 7 * devicePixelRatio;
      ctx.strokeStyle = COLORS.capacity; ctx.lineWidth = 3 * devicePixelRatio;
      ctx.beginPath(); ctx.moveTo(x - r, y - r); ctx.lineTo(x + r, y + r); ctx.moveTo(x + r, y - r); ctx.lineTo(x - r, y + r); ctx.stroke();
      const label = 'OOM (' + m.mode + ')', room = x + r + ctx.measureText(label).width < left + w;
      ctx.fillStyle = COLORS.capacity; ctx.textAlign = room ? 'left' : 'right';
      ctx.fillText(label, room ? x + r + 2 : x - r - 2, y - r);
      ctx.textAlign = 'left';
    }
    ctx.restore();
  }

  // ---- segment map: segments laid end to end, wrapped into rows of equal bytes ----
  function segmentMaps(maps, note) {
    const s = section('segments', 'Segment map', note);
    let most = 1;
    for (const m of maps) most = Math.max(most, m.reserved_bytes);
    const rowBytes = Math.ceil(most / 24);  // whole bytes: the row arithmetic stays exact
    for (const m of maps) {
      const frag = m.reserved_bytes > 0 ? (m.free_bytes / m.reserved_bytes * 100).toFixed(1) : '0';
      s.appendChild(el('h3', { text: m.mode + ': ' + m.segments.length + ' segments, ' + gb(m.reserved_bytes) +
        ' reserved, ' + gb(m.free_bytes) + ' free (' + frag + '%), largest free block ' + gb(m.largest_free_bytes) }));
      const canvas = el('canvas', { class: 'segmap', 'data-mode': m.mode, 'data-segments': m.segments.length });
      s.appendChild(canvas);
      drawSegmentMap(canvas, m, rowBytes);
    }
    const legend = el('div', { class: 'legend' }, [
      el('span', {}, [el('i', { style: 'background:' + COLORS.block }), 'allocated block']),
      el('span', {}, [el('i', { style: 'background:' + COLORS.free }), 'free (cached) block']),
      el('span', {}, [el('i', { style: 'background:' + COLORS.segment }), 'segment start'])]);
    s.appendChild(legend);
  }
  function drawSegmentMap(canvas, m, rowBytes) {
    const dpr = devicePixelRatio, W = Math.max(400, canvas.parentNode.clientWidth || 1100), rowH = 14;
    const rows = Math.max(1, Math.ceil(m.reserved_bytes / rowBytes));
    canvas.width = W * dpr; canvas.height = rows * rowH * dpr; canvas.style.height = rows * rowH + 'px';
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    const span = function (pos, size, color) {
      while (size > 0) {
        const row = Math.floor(pos / rowBytes), off = pos - row * rowBytes, take = Math.min(size, rowBytes - off);
        ctx.fillStyle = color;
        ctx.fillRect(off / rowBytes * W, row * rowH + 1, Math.max(0.5, take / rowBytes * W), rowH - 2);
        pos += take; size -= take;
      }
    };
    let pos = 0;
    for (const seg of m.segments) {
      for (const b of seg.blocks) span(pos + b[0], b[1], b[2] ? COLORS.block : COLORS.free);
      const row = Math.floor(pos / rowBytes);
      ctx.fillStyle = COLORS.segment;
      ctx.fillRect((pos - row * rowBytes) / rowBytes * W, row * rowH, 1.5, rowH);
      pos += seg.size;
    }
  }

  // ---- plan: throughput vs memory margin ----
  function plan(p) {
    const s = section('plan', 'Plan: throughput against memory margin',
      'Each fitting candidate at its predicted tokens/s/GPU and its margin under the allocator mode it is ranked under; the chosen (first) one is highlighted.');
    const cands = p.candidates || [];
    if (!cands.length) { s.appendChild(el('p', { text: p.nothing_fits || 'No candidate fits.' })); return; }
    const pts = cands.map((c) => ({ c: c, x: c.verdict[c.mode].margin_bytes / GB, y: c.predicted.tokens_per_s_per_gpu }));
    pts.sort((a, b) => a.x - b.x);
    const chosen = cands[0];
    const box = el('div', { class: 'chart', id: 'plan-chart' });
    s.appendChild(box);
    new uPlot({
      width: Math.max(400, box.clientWidth || 1100), height: 300,
      scales: { x: { time: false } },
      axes: [{ label: 'memory margin (GB)' }, { label: 'tokens/s/GPU', size: 70 }],
      series: [{ label: 'margin GB' },
        { label: 'candidates', stroke: '#495057', paths: () => null, points: { show: true, size: 9, fill: '#adb5bd' } },
        { label: 'chosen', stroke: COLORS.capacity, paths: () => null, points: { show: true, size: 14, fill: COLORS.capacity } }],
    }, [pts.map((q) => q.x), pts.map((q) => q.y), pts.map((q) => (q.c === chosen ? q.y : null))], box);
    const rows = cands.map((c) => el('tr', { class: c === chosen ? 'chosen' : '' }, [
      el('td', { text: String(c.rank) }), el('td', { text: c.layout || '' }),
      el('td', { text: (c.changes || []).map((x) => x.field + '=' + x.value).join(', ') || '(as is)' }),
      el('td', { text: c.mode + ': ' + stateText(c.verdict[c.mode].state) + ', ' + gb(c.verdict[c.mode].margin_bytes) }),
      el('td', { text: Math.round(c.predicted.tokens_per_s_per_gpu) + ' (' + (c.change_pct >= 0 ? '+' : '') + c.change_pct.toFixed(1) + '%)' }),
      el('td', { text: c.reason || '' })]));
    s.appendChild(el('table', { id: 'plan-table' }, [el('tr', {}, ['#', 'layout', 'changes', 'verdict', 'tokens/s/GPU', 'why'].map((h) => el('th', { text: h })))].concat(rows)));
  }

  // ---- diagnosis ----
  function diagnosis(d) {
    const s = section('diagnosis', 'Diagnosis');
    s.appendChild(el('div', { class: 'card' }, [el('h3', { text: 'cause: ' + d.cause }), el('div', { text: 'confidence: ' + d.confidence })]));
    s.appendChild(el('h3', { text: 'Evidence' }));
    // One item per quoted line, with every value read from it.
    const groups = [];
    for (const e of d.evidence || []) {
      const last = groups[groups.length - 1];
      const where = e.source + ':' + e.line;
      if (last && last.where === where && last.text === e.text) last.items.push(e);
      else groups.push({ where: where, text: e.text, items: [e] });
    }
    s.appendChild(el('ul', { class: 'evidence' }, groups.map((g) => el('li', {},
      g.items.map((e) => el('span', {}, [el('b', { text: e.what + ': ' }),
        (e.value_bytes != null ? gib(e.value_bytes) : (e.value || '')) + ';  '])).concat([
        el('span', { class: 'muted', text: g.where }), el('br'), el('code', { text: g.text })])))));
    s.appendChild(el('h3', { text: 'Fixes, in order' }));
    s.appendChild(el('ol', { class: 'fixes' }, (d.fixes || []).map((f) => el('li', {}, [
      el('b', { text: f.text }), el('span', { class: 'muted', text: '  cost: ' + f.cost + (f.effect ? '; ' + f.effect : '') })]))));
    if ((d.notes || []).length) s.appendChild(el('ul', {}, d.notes.map((n) => el('li', { text: n }))));
  }

  // ---- snapshot summary ----
  function snapshotSummary(data) {
    const s = section('verdicts', 'Snapshot and replay under the other segment mode');
    const cards = el('div', { class: 'cards' });
    for (const d of (data.inspect && data.inspect.devices) || []) {
      cards.appendChild(el('div', { class: 'card' }, [el('h3', { text: 'device ' + d.device + ' (recorded)' }),
        el('div', { text: gb(d.reserved_bytes) + ' reserved, ' + gb(d.allocated_bytes) + ' allocated at the snapshot' }),
        el('div', { text: 'fragmentation ' + ((d.fragmentation || 0) * 100).toFixed(0) + '%, largest free block ' + gb(d.largest_free_block_bytes || 0) })]));
    }
    for (const d of (data.replay && data.replay.devices) || []) {
      const r = d.replayed, rec = d.recorded;
      cards.appendChild(el('div', { class: 'card verdict' }, [el('h3', { text: 'replay: ' + d.alloc_conf }),
        el('div', { class: 'state ' + (r.oom ? 'oom' : 'fits'), text: r.oom ? 'OOM' : 'fits' }),
        el('div', { text: 'peak reserved ' + gb(r.peak_reserved_bytes) + ' (recorded ' + gb(rec.peak_reserved_bytes) + (rec.oom ? ', recorded OOM' : '') + ')' }),
        el('div', { class: 'muted', text: 'capacity: ' + (d.capacity_bytes ? gb(d.capacity_bytes) : 'unlimited') + ' (' + d.capacity_source + ')' })]));
    }
    s.appendChild(cards);
  }

  const charts = {};
  function render() {
    document.getElementById('loading').remove();
    document.getElementById('title').textContent = data.title;
    document.title = data.title;
    if (data.kind === 'job') {
      verdicts(data.estimate);
      bars(data.estimate);
      if (data.timeline) {
        charts.timeline = timeline(data.timeline, 'Allocator timeline, pipeline rank ' + data.timeline.rank,
          'Allocated and reserved bytes after each synthesized event under both allocator modes; the strip on top shows the phase, dashed lines the iterations, the red line the memory usable by PyTorch.');
      }
      if (data.segments) segmentMaps(data.segments, 'Each mode\'s segments at its reserved peak, laid end to end (rows of equal bytes).');
      if (data.plan) plan(data.plan);
    } else if (data.kind === 'snapshot') {
      snapshotSummary(data);
      if (data.timeline && data.timeline.events > 0) {
        charts.timeline = timeline(data.timeline, 'Recorded timeline, device ' + data.timeline.device,
          'Requested bytes of live allocations and reserved bytes after each trace entry, as recorded.');
      }
      if (data.segments) segmentMaps(data.segments, 'The segments and blocks when the snapshot was taken.');
    } else if (data.kind === 'oom') {
      diagnosis(data.diagnosis);
    }
    window.memtuneReport = { kind: data.kind, renderMs: performance.now() - t0, charts: charts };
    document.body.dataset.rendered = 'true';
  }
  render();
})();
