// stacklens flame graph: click a frame to zoom, click the root or "Reset zoom" to go
// back, "Search" (or Ctrl-F) highlights frames whose name matches a regex. Frame names
// are read from the document, never from script text.
(function () {
  var svg = document.currentScript ? document.currentScript.closest('svg') : null;
  svg = svg || document.querySelector('svg.stacklens-flamegraph');
  var width = Number(svg.getAttribute('data-width'));
  var frames = [].slice.call(svg.querySelectorAll('g.frame'));
  var matched = svg.querySelector('.matched');
  var reset = svg.querySelector('.reset');
  function name(g) { return g.querySelector('title').getAttribute('data-name'); }
  function fit(g, w) {
    var text = g.querySelector('text'), n = name(g), room = Math.floor((w - 6) / 7);
    text.textContent = room < 3 ? '' : (n.length <= room ? n : n.slice(0, room - 2) + '..');
  }
  function place(g, x, w) {
    var rect = g.querySelector('rect');
    rect.setAttribute('x', x.toFixed(2));
    rect.setAttribute('width', Math.max(w - 0.5, 0.1).toFixed(2));
    g.querySelector('text').setAttribute('x', (x + 3).toFixed(2));
    fit(g, w);
    g.style.display = '';
  }
  function zoom(target) {
    var tx = Number(target.getAttribute('data-x')), tw = Number(target.getAttribute('data-w'));
    var td = Number(target.getAttribute('data-d'));
    frames.forEach(function (g) {
      var x = Number(g.getAttribute('data-x')), w = Number(g.getAttribute('data-w'));
      var d = Number(g.getAttribute('data-d'));
      if (d < td && x <= tx && x + w >= tx + tw) place(g, 0, width);
      else if (d >= td && x >= tx && x + w <= tx + tw + 1e-12) place(g, (x - tx) / tw * width, w / tw * width);
      else g.style.display = 'none';
    });
    reset.style.display = td === 0 ? 'none' : '';
  }
  function search(pattern) {
    var re;
    try { re = pattern ? new RegExp(pattern) : null; } catch (e) { matched.textContent = 'invalid regex'; return; }
    var covered = [];
    frames.forEach(function (g) {
      var hit = re !== null && re.test(name(g));
      g.classList.toggle('hit', hit);
      var x = Number(g.getAttribute('data-x')), w = Number(g.getAttribute('data-w'));
      if (hit && !covered.some(function (c) { return x >= c[0] && x + w <= c[1] + 1e-12; })) covered.push([x, x + w]);
    });
    var share = covered.reduce(function (s, c) { return s + c[1] - c[0]; }, 0);
    matched.textContent = re ? 'Matched: ' + (share * 100).toFixed(2) + '%' : '';
  }
  frames.forEach(function (g) { g.addEventListener('click', function () { zoom(g); }); });
  reset.addEventListener('click', function () { zoom(frames[0]); });
  svg.querySelector('.search').addEventListener('click', function () {
    search(window.prompt('Search for (regex):', ''));
  });
  window.addEventListener('keydown', function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); search(window.prompt('Search for (regex):', '')); }
  });
  window.stacklensSearch = search;
  frames.forEach(function (g) {
    place(g, Number(g.getAttribute('data-x')) * width, Number(g.getAttribute('data-w')) * width);
  });
  reset.style.display = 'none';
})();
