"""A trace as one self-contained HTML page that verifies it in the reader's browser.

The page holds the trace's exact bytes (base64, so no byte of the trace can end the script
element or be read as markup) and a short script that, with WebCrypto's SHA-256:

- checks each line's frame, that its digest is the sha256 of its event bytes, that those bytes
  are the RFC 8785 canonical form of what they parse to (so a duplicate key or a non-canonical
  number is refused, as `verify_trace` refuses it), that ``seq`` is its position and ``prev``
  the digest before it;
- takes a redacted event's line (``{"digest":d,"redacted":true}``) as its digest alone, into
  the chain and the tree, and says which seqs are redacted;
- recomputes the RFC 9162 Merkle root over the events' digests (leaf =
  ``sha256(0x00 || digest bytes)``, node = ``sha256(0x01 || left || right)``), and compares it
  with a root the reader pastes (a published checkpoint's);
- shows the run as a timeline (steps, messages, tool calls with arguments and results, policy
  decisions with reasons, the answer), with each run it links (a sub-agent's, a simulated
  user's, given as ``children``) verified against its link and nested below it, and a verdict: verified, or where the trace breaks, or
  (with an embedded published checkpoint) that the checkpoint does not match or leaves events
  unvouched for: a checkpoint that fails is the verdict, never a note under a green one.

The trace is hostile input: the script puts its strings into the page with ``textContent``
only, never as markup, and a Content-Security-Policy forbids every fetch, so a string such as
``</script><img src=x onerror=...>`` is shown as text and nothing leaves the machine.
The verdict is also set on the root element (``data-verdict``, ``data-break-seq``,
``data-root``), which the headless-browser test reads.

WebCrypto needs a secure context: a page opened from a ``file:`` URL, ``https:`` or
``http://127.0.0.1`` is one; elsewhere the page says it cannot verify instead of guessing.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping

__all__ = ["render_trace_page"]

_CSS = """
body{font:15px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:62rem;padding:0 1rem;color:#1d232a}
h1{font-size:1.4rem;word-break:break-all}#verdict{font-size:1.1rem;padding:.6rem .8rem;border-radius:6px;background:#eef1f4}
#verdict[data-verdict=verified]{background:#e3f4e6;color:#135c26}#verdict[data-verdict=broken],#verdict[data-verdict^=checkpoint]{background:#fbe4e4;color:#8a1414}
#verdict[data-verdict=unsupported],#verdict[data-verdict=error]{background:#fff3d6;color:#6b4a00}
ol{list-style:none;padding:0}li.ev{border-left:3px solid #c9d1d9;margin:.4rem 0;padding:.2rem .7rem}
li.ev.broken{border-left-color:#c62828;background:#fdf0f0}li.ev.unverified{opacity:.6}
.head{font-size:12px;color:#57606a}.kind{font-weight:600}.step{margin-top:1rem;font-weight:600}
pre{white-space:pre-wrap;word-break:break-word;margin:.2rem 0;font-size:13px;background:#f6f8fa;padding:.3rem .5rem}
ol.child{margin-left:1.2rem;border-left:2px dashed #c9d1d9;padding-left:.4rem}
.deny{color:#a61b1b}.allow{color:#135c26}code{word-break:break-all}
"""

# Plain ES2017, no framework: every string from the trace goes through text() (textContent).
_SCRIPT = r"""
(function () {
  'use strict';
  var root = document.documentElement;
  var verdict = document.getElementById('verdict');
  var GENESIS = '0000000000000000000000000000000000000000000000000000000000000000';
  function setVerdict(state, message) {
    verdict.setAttribute('data-verdict', state);
    root.setAttribute('data-verdict', state);
    verdict.textContent = message;
  }
  function enc(s) { return new TextEncoder().encode(s); }
  function dec(b) { return new TextDecoder('utf-8').decode(b); }
  function hex(buf) {
    var b = new Uint8Array(buf), s = '';
    for (var i = 0; i < b.length; i++) { s += (b[i] < 16 ? '0' : '') + b[i].toString(16); }
    return s;
  }
  function unhex(s) {
    var out = new Uint8Array(s.length / 2);
    for (var i = 0; i < out.length; i++) { out[i] = parseInt(s.substr(2 * i, 2), 16); }
    return out;
  }
  function cat(a, b, c) {
    var out = new Uint8Array(a.length + b.length + (c ? c.length : 0));
    out.set(a, 0); out.set(b, a.length); if (c) { out.set(c, a.length + b.length); }
    return out;
  }
  function startsAt(line, part, at) {
    if (line.length < at + part.length) { return false; }
    for (var i = 0; i < part.length; i++) { if (line[at + i] !== part[i]) { return false; } }
    return true;
  }
  function sha(bytes) { return crypto.subtle.digest('SHA-256', bytes).then(function (d) { return new Uint8Array(d); }); }
  async function mth(leaves) {
    // RFC 9162 section 2.1.1: split at the largest power of two smaller than n.
    if (leaves.length === 0) { return sha(new Uint8Array(0)); }
    if (leaves.length === 1) { return leaves[0]; }
    var k = 1; while (k * 2 < leaves.length) { k *= 2; }
    var left = await mth(leaves.slice(0, k)), right = await mth(leaves.slice(k));
    return sha(cat(new Uint8Array([1]), left, right));
  }
  function el(tag, cls, content) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (content !== undefined) { node.textContent = String(content); }
    return node;
  }
  function json(value) { return JSON.stringify(value, null, 1); }
  function messageLines(message, into) {
    if (!message || !Array.isArray(message.parts)) { return; }
    message.parts.forEach(function (part) {
      var role = String(message.role);
      if (part.kind === 'text' || part.kind === 'reasoning') {
        into.appendChild(el('pre', '', role + (part.kind === 'reasoning' ? ' (reasoning)' : '') + ': ' + part.text));
      } else if (part.kind === 'tool_call') {
        into.appendChild(el('pre', '', role + ' asks to call ' + part.name + ' ' + json(part.arguments)));
      } else if (part.kind === 'tool_result') {
        into.appendChild(el('pre', '', 'result of ' + part.name + (part.is_error ? ' (error)' : '') + ': ' + part.content));
        resultParts(part, into);
      } else if (part.kind === 'structured') {
        into.appendChild(el('pre', '', role + ' answers (' + part.schema_name + '): ' + json(part.value)));
      } else {
        otherPart(part, role, into);
      }
    });
  }
  function otherPart(part, label, into) {
    var fields = {};
    Object.keys(part || {}).forEach(function (k) { if (k !== 'kind') { fields[k] = part[k]; } });
    into.appendChild(el('pre', '', label + ' (' + String(part && part.kind) + '): ' + json(fields)));
  }
  function resultParts(result, into) {
    if (!Array.isArray(result.parts)) { return; }
    result.parts.forEach(function (part) {
      if (!part || part.kind !== 'text') { otherPart(part, 'result part', into); }
    });
  }
  function describe(body, into) {
    var kind = body && body.kind;
    if (kind === 'run_started') {
      into.appendChild(el('pre', '', 'prompt: ' + body.prompt));
      var config = body.config || {};
      if (config.system_prompt) { into.appendChild(el('pre', '', 'system: ' + config.system_prompt)); }
      var tools = (config.tools || []).map(function (t) { return t.name; }).join(', ') || 'none';
      var allow = ((config.policy || {}).allow || []).join(', ') || 'nothing';
      into.appendChild(el('div', '', 'run ' + body.run_id + ' · tools: ' + tools + ' · policy allows: ' + allow));
      if (Array.isArray(config.part_kinds) && config.part_kinds.length) { into.appendChild(el('div', '', 'part kinds: ' + config.part_kinds.map(function (k) { return String((k || {}).kind) + ' (' + String((k || {}).type) + ')'; }).join(', '))); }
      if (body.parent) { into.appendChild(el('div', '', 'forked at step ' + body.parent.step + ' from the run whose trace had ' + body.parent.size + ' events, root (hex) ' + body.parent.root)); }
    } else if (kind === 'model_requested') {
      into.appendChild(el('div', '', (body.purpose === 'reask' ? 're-ask' : 'request') + ' with ' + (body.new_messages || []).length + ' new message(s)'));
      (body.new_messages || []).forEach(function (m) { messageLines(m, into); });
    } else if (kind === 'model_responded') {
      messageLines((body.response || {}).message, into);
    } else if (kind === 'policy_decided') {
      into.appendChild(el('div', body.decision === 'allow' ? 'allow' : 'deny', body.decision + ' ' + body.tool + ' (by ' + body.by + '): ' + body.reason));
    } else if (kind === 'tool_called') {
      into.appendChild(el('pre', '', body.tool + ' ' + json(body.arguments)));
    } else if (kind === 'tool_returned') {
      var result = body.result || {};
      into.appendChild(el('pre', result.is_error ? 'deny' : '', (result.is_error ? 'error: ' : '') + result.content));
      resultParts(result, into);
    } else if (kind === 'output_rejected') {
      into.appendChild(el('pre', 'deny', 'attempt ' + body.attempt + ' rejected: ' + body.error));
    } else if (kind === 'output_accepted') {
      into.appendChild(el('pre', 'allow', 'answer' + (body.schema_name ? ' (' + body.schema_name + ')' : '') + ': ' + json(body.value)));
    } else if (kind === 'tools_listed') {
      var info = body.server_info || {};
      var names = (body.tools || []).map(function (t) { return t.name; }).join(', ') || 'none';
      into.appendChild(el('div', '', 'MCP server ' + body.server + ' (' + info.name + ' ' + info.version + ', protocol ' + body.protocol_version + ') lists: ' + names));
    } else if (kind === 'user_turn') {
      into.appendChild(el('pre', '', 'turn ' + body.turn + ', the user: ' + body.text));
    } else if (kind === 'run_finished') {
      into.appendChild(el('div', '', 'finished after ' + body.steps + ' step(s)'));
    } else if (kind === 'run_failed') {
      into.appendChild(el('pre', 'deny', 'failed after ' + body.steps + ' step(s): ' + body.error_type + ': ' + body.message));
    } else {
      into.appendChild(el('pre', '', json(body)));
    }
  }
  // RFC 8785 is ECMAScript's own JSON.stringify with object members sorted by UTF-16 code
  // units: re-encoding what JSON.parse read and comparing bytes catches every form verify
  // refuses (a duplicate key parses to fewer members, "2.50" re-encodes as "2.5", ...).
  function canon(v) {
    if (v === null || typeof v !== 'object') { return JSON.stringify(v); }
    if (Array.isArray(v)) { return '[' + v.map(canon).join(',') + ']'; }
    return '{' + Object.keys(v).sort().map(function (k) { return JSON.stringify(k) + ':' + canon(v[k]); }).join(',') + '}';
  }
  function same(a, b) {
    if (a.length !== b.length) { return false; }
    for (var i = 0; i < a.length; i++) { if (a[i] !== b[i]) { return false; } }
    return true;
  }
  async function check() {
    var secure = window.isSecureContext && window.crypto && crypto.subtle;
    root.setAttribute('data-secure', secure ? 'true' : 'false');
    if (!secure) {
      setVerdict('unsupported', 'Not checked: this browser offers WebCrypto only to pages opened from a file, https or localhost.');
      return;
    }
    var top = await readTrace(bytesOf(document.getElementById('trace-data').textContent));
    var events = top.events, problem = top.problem, leaves = top.leaves, digests = top.digests, redacted = top.redacted;
    var merkle = hex(await mth(leaves));
    var children = await readChildren();
    var childProblem = problem || !children.given ? null : await linkChildren(events, children, 1);
    render(document.getElementById('timeline'), events, problem, true);
    var published = await checkCheckpoint(leaves, digests);
    root.setAttribute('data-events', String(leaves.length));
    root.setAttribute('data-redacted', redacted.join(','));
    root.setAttribute('data-root', merkle);
    root.setAttribute('data-children', String(children.verified));
    document.getElementById('root').textContent = merkle;
    if (problem) {
      root.setAttribute('data-break-seq', String(problem[0]));
      setVerdict('broken', 'NOT VERIFIED: the trace breaks at seq ' + problem[0] + ': ' + problem[1] + '. The ' + leaves.length + ' event(s) before it verify.');
      var broken = document.getElementById('seq-' + problem[0]);
      if (broken) { broken.classList.add('broken'); }
    } else if (published && published.state !== 'match') {
      // The checkpoint is what ties the trace to its publisher: failing it is the verdict.
      setVerdict('checkpoint-' + published.state, 'NOT VERIFIED against the published checkpoint: ' + published.message);
    } else if (childProblem) {
      // A linked run that is missing or does not match its link: the tree does not verify.
      setVerdict('child-broken', 'NOT VERIFIED: ' + childProblem);
    } else {
      var runs = children.verified ? ', and the ' + children.verified + ' linked run(s) below it match their links' : '';
      setVerdict('verified', 'Verified in this browser: ' + leaves.length + ' events, every digest, the canonical form and the hash chain check out' + (published ? ', and the published checkpoint covers all of them' : '') + runs + (redacted.length ? '; seq ' + redacted.join(', ') + (redacted.length > 1 ? ' are' : ' is') + ' REDACTED (digest only)' : '') + '; Merkle root below.');
    }
    var input = document.getElementById('expected-root');
    input.addEventListener('input', function () {
      var want = input.value.trim().toLowerCase();
      document.getElementById('root-match').textContent = !want ? '' : (want === merkle ? 'matches the published root' : 'DOES NOT match the published root');
    });
  }
  function bytesOf(b64) {
    var text = atob(b64.trim());
    var raw = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { raw[i] = text.charCodeAt(i); }
    return raw;
  }
  // The runs the trace links (sub-agents, a simulated user), embedded by file name: each is
  // verified on its own, then against its link's size and root.
  async function readChildren() {
    var holder = document.getElementById('children-data'), out = { byName: {}, verified: 0, given: !!holder };
    if (!holder) { return out; }
    var named = {};
    try { named = JSON.parse(dec(bytesOf(holder.textContent))); } catch (e) { named = {}; }
    var names = Object.keys(named || {});
    for (var i = 0; i < names.length; i++) {
      if (typeof named[names[i]] === 'string') { out.byName[names[i]] = await readTrace(bytesOf(named[names[i]])); }
    }
    return out;
  }
  async function linkChildren(events, children, depth) {
    var shown = {}, first = null;
    for (var n = 0; n < events.length; n++) {
      var body = events[n].event && events[n].event.body;
      var simulated = body && body.kind === 'user_turn';
      var link = body && (body.kind === 'tool_returned' ? body.child : simulated ? body.simulator : null);
      if (!link || typeof link !== 'object' || typeof link.trace !== 'string') { continue; }
      var name = link.trace;
      var label = (simulated ? 'simulated user ' : 'sub-agent ' + String((body.result || {}).name) + ' ') + name;
      var read = children.byName[name], problem = null;
      if (!read) {
        problem = 'its trace is not on this page (twinflow show --html embeds the linked files beside the trace)';
      } else if (read.problem) {
        problem = 'its trace does not verify at seq ' + read.problem[0] + ': ' + read.problem[1];
      } else if (link.size > read.leaves.length || (!simulated && link.size !== read.leaves.length)) {
        problem = 'its trace holds ' + read.leaves.length + ' events; the link vouches for ' + link.size;
      } else if (hex(await mth(read.leaves.slice(0, link.size))) !== link.root) {
        problem = 'its trace was edited: its root does not match the link\'s ' + link.root;
      } else if (((read.events[0] || {}).event || {}).body && read.events[0].event.body.run_id !== link.run_id) {
        problem = 'its trace is another run than the link names (' + link.run_id + ')';
      }
      // A simulated user's trace is linked from each turn it wrote: each shows its new part.
      var from = simulated ? (shown[name] || 0) : 0;
      events[n].child = { label: label, problem: problem, events: read && !problem ? read.events.slice(from, link.size) : [] };
      if (simulated) { shown[name] = link.size; }
      if (problem) { first = first || label + ' (seq ' + n + '): ' + problem; continue; }
      if (from === 0) { children.verified += 1; }
      if (depth < 4) { first = first || await linkChildren(events[n].child.events, children, depth + 1); }
    }
    return first;
  }
  async function readTrace(raw) {
    var lines = [], start = 0;
    for (var j = 0; j < raw.length; j++) { if (raw[j] === 10) { lines.push(raw.subarray(start, j)); start = j + 1; } }
    var partial = raw.length - start;
    var PREFIX = enc('{"digest":"'), INFIX = enc('","event":');
    var at = PREFIX.length + 64 + INFIX.length;
    var prev = GENESIS, leaves = [], digests = [], problem = null, events = [], redacted = [];
    var SUFFIX = enc('","redacted":true}');
    for (var n = 0; n < lines.length; n++) {
      var line = lines[n], event = null;
      // A redacted event: its digest alone (the chain and the tree keep it; its bytes are gone).
      if (line.length === PREFIX.length + 64 + SUFFIX.length && startsAt(line, PREFIX, 0) && startsAt(line, SUFFIX, PREFIX.length + 64)
          && /^[0-9a-f]{64}$/.test(dec(line.subarray(PREFIX.length, PREFIX.length + 64)))) {
        var kept = dec(line.subarray(PREFIX.length, PREFIX.length + 64));
        events.push({ event: null, ok: !problem, redacted: kept });
        if (problem) { continue; }
        redacted.push(n);
        leaves.push(await sha(cat(new Uint8Array([0]), unhex(kept))));
        digests.push(kept);
        prev = kept;
        continue;
      }
      var framed = startsAt(line, PREFIX, 0) && startsAt(line, INFIX, PREFIX.length + 64) && line[line.length - 1] === 125;
      if (framed) { try { event = JSON.parse(dec(line.subarray(at, line.length - 1))); } catch (e) { event = null; } }
      events.push({ event: event, ok: false });
      if (problem) { continue; }
      if (!framed) { problem = [n, 'line ' + (n + 1) + ' is not a trace line (its frame is damaged)']; continue; }
      var digest = dec(line.subarray(PREFIX.length, PREFIX.length + 64));
      var actual = hex(await sha(line.subarray(at, line.length - 1)));
      if (actual !== digest) { problem = [n, 'event ' + n + ' was edited: its bytes do not match its digest']; continue; }
      if (!event || typeof event !== 'object' || !event.body) { problem = [n, 'line ' + (n + 1) + ' matches its digest but is not an event (forged)']; continue; }
      if (!same(enc(canon(event)), line.subarray(at, line.length - 1))) { problem = [n, 'event ' + n + ' is not in canonical form (a duplicate key, a number, escape, whitespace or key order not the RFC 8785 one): twinflow verify refuses it']; continue; }
      if (event.seq !== n) { problem = [n, 'line ' + (n + 1) + ' holds seq ' + event.seq + ' where seq ' + n + ' belongs: events were removed, reordered or inserted']; continue; }
      if (event.prev !== prev) { problem = [n, 'the chain breaks at seq ' + n + ': its prev is not the digest of the event before']; continue; }
      events[n].ok = true;
      leaves.push(await sha(cat(new Uint8Array([0]), unhex(digest))));
      digests.push(digest);
      prev = digest;
    }
    if (!problem && partial > 0) { problem = [lines.length, 'the last line is incomplete (' + partial + ' bytes, no newline): the writer was cut off'] ; }
    if (!problem && lines.length === 0) { problem = [0, 'the trace holds no events']; }
    return { events: events, problem: problem, leaves: leaves, digests: digests, redacted: redacted };
  }
  async function checkCheckpoint(leaves, digests) {
    var holder = document.getElementById('checkpoint-data');
    if (!holder) { return; }
    var out = document.getElementById('checkpoint-result');
    var cp = null;
    try { cp = JSON.parse(dec(Uint8Array.from(atob(holder.textContent.trim()), function (c) { return c.charCodeAt(0); }))); } catch (e) { cp = null; }
    // A C2SP note carries no head digest: ``head`` is compared only when the checkpoint has one.
    if (!cp || typeof cp.size !== 'number' || typeof cp.root !== 'string' || (cp.head !== undefined && typeof cp.head !== 'string')) {
      root.setAttribute('data-checkpoint', 'invalid'); out.textContent = 'The published checkpoint is not readable.';
      return { state: 'invalid', message: 'it is not readable.' };
    }
    var covered = cp.size >= 0 && cp.size <= leaves.length;
    var cpRoot = covered ? hex(await mth(leaves.slice(0, cp.size))) : '';
    var cpHead = covered ? (cp.size ? digests[cp.size - 1] : GENESIS) : '';
    var match = covered && cpRoot === cp.root && (cp.head === undefined || cpHead === cp.head);
    root.setAttribute('data-checkpoint', match ? 'match' : 'mismatch');
    var result = { state: 'match', message: '' };
    if (!match) {
      result = { state: 'mismatch', message: covered ? 'it (size ' + cp.size + ') does NOT match these events: they were rewritten, or this is another trace.'
                                                     : 'it covers ' + cp.size + ' events; only ' + leaves.length + ' verify here.' };
    } else if (cp.size < leaves.length) {
      result = { state: 'tail', message: 'it covers events 0-' + (cp.size - 1) + ' of ' + leaves.length + ': events ' + cp.size + '-' + (leaves.length - 1) + ' are not vouched for by it (anyone can append or re-chain them).' };
    }
    root.setAttribute('data-coverage', cp.size + ' of ' + leaves.length);
    out.textContent = match
      ? 'The published checkpoint (size ' + cp.size + ') matches the first ' + cp.size + ' of ' + leaves.length + ' verified events.'
      : 'The published checkpoint ' + result.message.replace(/^it /, '');
    return result;
  }
  function render(list, events, problem, top) {
    var step = -1;
    events.forEach(function (item, n) {
      var body = item.event && item.event.body;
      if (body && typeof body.step === 'number' && body.step !== step) {
        step = body.step; list.appendChild(el('li', 'step', 'step ' + step));
      }
      var li = el('li', 'ev' + (item.ok ? '' : ' unverified'));
      if (top) { li.id = 'seq-' + n; }
      var kind = item.redacted ? 'REDACTED' : body && body.kind ? String(body.kind) : '(unreadable line)';
      var head = el('div', 'head');
      head.appendChild(el('span', 'kind', kind));
      head.appendChild(document.createTextNode(' · seq ' + n + (item.event && item.event.at ? ' · ' + item.event.at : '') + (item.ok ? '' : ' · not verified')));
      li.appendChild(head);
      if (item.redacted) { li.appendChild(el('div', '', 'only its digest is published: ' + item.redacted)); }
      if (body) { describe(body, li); }
      if (item.child) {
        // The linked run, nested below the call (or the turn) that links it, as `show` prints it.
        li.appendChild(el('div', 'kind' + (item.child.problem ? ' deny' : ''), item.child.label + (item.child.problem ? ': NOT VERIFIED: ' + item.child.problem : '')));
        var nested = el('ol', 'child');
        nested.setAttribute('data-trace', item.child.label);
        render(nested, item.child.events, null, false);
        li.appendChild(nested);
      }
      list.appendChild(li);
    });
  }
  check().catch(function (e) { setVerdict('error', 'Could not check the trace: ' + e); });
})();
"""


def render_trace_page(
    data: bytes,
    title: str,
    checkpoint: Mapping[str, object] | None = None,
    children: Mapping[str, bytes] | None = None,
) -> str:
    """One self-contained HTML page that shows a trace and verifies it in the browser.

    Args:
        data: The trace file's bytes, exactly as read (a damaged trace included: the page
            says where it breaks).
        title: What the page is called (escaped; a file name, say).
        checkpoint: A published checkpoint (``size`` and hex ``root``, optionally ``head``),
            its note's signatures already checked by the caller (`twinflow show --html
            --checkpoint`), that the page checks the events against.
        children: The traces the trace links (sub-agents' ``tool_returned.child``, a
            simulated user's ``user_turn.simulator``, and theirs), by file name: each is
            verified in the browser against its link and shown nested below the event that
            links it. A link whose trace is not given, or does not match, is the verdict.
            None: the links are not checked (the page says nothing of them).

    Returns:
        The page: no external asset, no network access, every trace string escaped.
    """
    encoded = base64.b64encode(data).decode("ascii")
    published = ""
    if checkpoint is not None:
        # base64 again: the checkpoint file is outside input too.
        cp = base64.b64encode(json.dumps(dict(checkpoint)).encode()).decode("ascii")
        published = (
            '<p>Published checkpoint: <span id="checkpoint-result">checking ...</span></p>\n'
            f'<script type="application/octet-stream" id="checkpoint-data">{cp}</script>\n'
        )
    if children is not None:
        named = {name: base64.b64encode(raw).decode("ascii") for name, raw in children.items()}
        kids = base64.b64encode(json.dumps(named, sort_keys=True).encode()).decode("ascii")
        published += f'<script type="application/octet-stream" id="children-data">{kids}</script>\n'
    # 'unsafe-inline' allows only this page's own inline script and style; every fetch,
    # image, frame and form is refused, so injected markup could reach nothing anyway.
    policy = (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "img-src 'none'; form-action 'none'; base-uri 'none'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en" data-verdict="pending"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>Trace {html.escape(title)}</h1>\n"
        '<p id="verdict" data-verdict="pending">Checking the trace in this browser ...</p>\n'
        '<p>Merkle root (RFC 9162): <code id="root"></code><br>'
        '<label>Published root to compare: <input id="expected-root" size="66"></label> '
        '<span id="root-match"></span></p>\n'
        f"{published}"
        '<ol id="timeline"></ol>\n'
        f'<script type="application/octet-stream" id="trace-data">{encoded}</script>\n'
        f"<script>{_SCRIPT}</script>\n</body></html>\n"
    )
