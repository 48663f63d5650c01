// boxmaker's web console: the one script. It streams a task's answer and follows a session
// live. Every piece of text from the box goes into the page through textContent, never as
// HTML, so nothing in a session's text can run.
(function () {
  'use strict';

  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = meta ? meta.getAttribute('content') : '';

  function byId(id) { return document.getElementById(id); }

  function line(into, text, kind) {
    var item = document.createElement('div');
    item.className = 'event ' + kind;
    item.textContent = text;
    into.appendChild(item);
  }

  function endName(end) {
    if (typeof end === 'string') { return end; }
    var keys = Object.keys(end || {});
    return keys.length ? keys[0] : 'unknown';
  }

  function endText(end) {
    if (typeof end === 'string') { return end.replace('_', ' '); }
    var name = endName(end);
    var detail = end[name] || {};
    return name + ': ' + (detail.reason || detail.message || '');
  }

  // What one turn event adds to the page: the answer's text, a line per call and result.
  function show(event, out, events, done) {
    if (event.type === 'subagent') {
      var inner = event.event || {};
      if (inner.type === 'tool_call') {
        line(events, '  ' + event.session + ' calls ' + inner.tool_call.name, 'tool');
      }
      return;
    }
    switch (event.type) {
      case 'started': done('started', event); break;
      case 'content': out.appendChild(document.createTextNode(event.text)); break;
      case 'tool_call':
        line(events, 'calls ' + event.tool_call.name + ' ' + event.tool_call.arguments, 'tool');
        break;
      case 'tool_result':
        line(events, 'result: ' + endName(event.outcome) + ' (' + event.bytes + ' bytes, ' +
          event['class'] + (event.untrusted ? ', untrusted' : '') + ')', 'tool');
        break;
      case 'approval_requested':
        line(events, event.tool + ' waits for your approval (Approvals page)', 'approval');
        break;
      case 'approval_decided':
        line(events, 'approval: ' + event.decision, 'approval');
        break;
      case 'retry': line(events, 'the model server is busy; trying again', 'retry'); break;
      case 'ended': done('ended', event); break;
      default: break;
    }
  }

  // Reads a server-sent event stream from a fetch body, calling onEvent per turn event.
  function readStream(body, onEvent) {
    var reader = body.getReader();
    var decoder = new TextDecoder();
    var buffer = '';
    function frame(text) {
      var name = '', data = '';
      text.split('\n').forEach(function (l) {
        if (l.indexOf('event: ') === 0) { name = l.slice(7); }
        if (l.indexOf('data: ') === 0) { data += l.slice(6); }
      });
      if (name === 'turn' && data) { onEvent(JSON.parse(data)); }
    }
    function pump() {
      return reader.read().then(function (chunk) {
        if (chunk.done) { return; }
        buffer += decoder.decode(chunk.value, { stream: true });
        var at;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          frame(buffer.slice(0, at));
          buffer = buffer.slice(at + 2);
        }
        return pump();
      });
    }
    return pump();
  }

  // Replaces the transcript (and the session's state) with the page as the server makes it
  // now: after a turn, the records it wrote. The HTML is the server's, escaped there, and a
  // parsed document runs no script.
  function refreshTranscript() {
    if (!byId('transcript')) { return Promise.resolve(); }
    return fetch(window.location.href, { credentials: 'same-origin' }).then(function (r) {
      return r.text();
    }).then(function (html) {
      var page = new DOMParser().parseFromString(html, 'text/html');
      ['transcript', 'session-state'].forEach(function (id) {
        var fresh = page.getElementById(id), old = byId(id);
        if (fresh && old) { old.replaceWith(document.importNode(fresh, true)); }
      });
    });
  }

  var form = byId('task-form');
  if (form) {
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var out = byId('answer'), status = byId('answer-status'), link = byId('answer-session');
      var events = byId('answer-events');
      var session = byId('task-session') ? byId('task-session').value.trim() : '';
      var body = { text: byId('task-text').value };
      if (session) { body.session = session; }
      out.textContent = '';
      events.textContent = '';
      status.textContent = 'running';
      status.setAttribute('data-end', '');
      byId('task-send').disabled = true;
      fetch('/api/tasks', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', 'Accept': 'text/event-stream',
          'X-CSRF-Token': csrf },
        body: JSON.stringify(body)
      }).then(function (response) {
        if (!response.ok) {
          return response.json().then(function (problem) {
            throw new Error(problem.error ? problem.error.message : response.statusText);
          });
        }
        return readStream(response.body, function (event) {
          show(event, out, events, function (what, ev) {
            if (what === 'started') {
              link.textContent = ev.session;
              link.setAttribute('href', '/sessions/' + encodeURIComponent(ev.session));
            } else {
              status.textContent = endText(ev.end);
              status.setAttribute('data-end', endName(ev.end));
              refreshTranscript();
            }
          });
        });
      }).catch(function (err) {
        status.textContent = 'error: ' + err.message;
        status.setAttribute('data-end', 'error');
      }).then(function () { byId('task-send').disabled = false; });
    });
  }

  var live = byId('live');
  if (live && window.EventSource) {
    var id = live.getAttribute('data-session');
    var source = new EventSource('/api/sessions/' + encodeURIComponent(id) + '/events');
    source.onopen = function () { live.setAttribute('data-following', ''); };
    // The stream stays open for the session's next turns; each turn's text replaces the last.
    source.addEventListener('turn', function (message) {
      live.hidden = false;
      show(JSON.parse(message.data), byId('live-text'), byId('live-events'), function (what, ev) {
        if (what === 'started') {
          byId('live-text').textContent = '';
          byId('live-events').textContent = '';
          live.removeAttribute('data-ended');
        } else {
          live.setAttribute('data-ended', String(ev.turn));
          refreshTranscript();
        }
      });
    });
  }
}());
