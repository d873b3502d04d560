// Filters: an element with data-<key> is hidden when a chosen value for <key> is not among its
// (space-separated) values; data-text must contain the search text. No framework, no network.
(function () {
  var selects = Array.prototype.slice.call(document.querySelectorAll('select[data-filter]'));
  var search = document.getElementById('search');
  var shown = document.getElementById('shown');
  function apply() {
    var text = search.value.trim().toLowerCase(), count = 0;
    document.querySelectorAll('.f').forEach(function (el) {
      var ok = selects.every(function (s) {
        var have = el.dataset[s.dataset.filter];
        return !s.value || have === undefined || have.split(' ').indexOf(s.value) >= 0;
      }) && (!text || el.dataset.text === undefined || el.dataset.text.indexOf(text) >= 0);
      el.hidden = !ok;
      if (ok && el.classList.contains('div')) count++;
    });
    // A matrix cell shows or hides with its column's header (cells carry no data of their own).
    document.querySelectorAll('table.matrix th.col').forEach(function (th) {
      th.closest('table').querySelectorAll('tr').forEach(function (tr) {
        if (tr.cells[th.cellIndex] && tr.cells[th.cellIndex] !== th) { tr.cells[th.cellIndex].hidden = th.hidden; }
      });
    });
    shown.textContent = count;
  }
  selects.forEach(function (s) { s.addEventListener('change', apply); });
  search.addEventListener('input', apply);
  // A matrix cell with divergences filters the detailed results down to its target and row.
  document.querySelectorAll('td.go').forEach(function (td) {
    td.addEventListener('click', function () {
      var head = td.closest('table').rows[0].cells[td.cellIndex].dataset, row = td.parentElement.dataset;
      selects.forEach(function (s) { s.value = head[s.dataset.filter] || row[s.dataset.filter] || ''; });
      apply();
      var first = document.querySelector('details.div:not([hidden])');
      if (first) { first.scrollIntoView(); }
    });
  });
  document.querySelectorAll('button.copy').forEach(function (b) {
    b.addEventListener('click', function () {
      var pre = document.getElementById(b.dataset.for);
      var range = document.createRange();
      range.selectNodeContents(pre);
      window.getSelection().removeAllRanges();
      window.getSelection().addRange(range);
      if (navigator.clipboard) { navigator.clipboard.writeText(pre.textContent).catch(function () {}); }
    });
  });
  // A link into a closed semantics page opens it, so the finding's anchor can be shown.
  function reveal() {
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    for (var el = target; el; el = el.parentElement) { if (el.tagName === 'DETAILS') { el.open = true; } }
    if (target) { target.scrollIntoView(); }
  }
  window.addEventListener('hashchange', reveal);
  reveal();
  apply();
})();
