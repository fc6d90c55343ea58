'use strict';
// The cross-language conformance vectors (tests/conformance/README.md), which the C, C++, Python,
// Go and Rust runners run too: every vector of tests/conformance/vectors/*.json through the Node
// API, on SQLite and on PostgreSQL (backends.js gives each vector its store).
//
// How a vector's JSON becomes JavaScript: the vector files are read keeping each number's text,
// each input is written as compact text (the library's escaping) and decoded with the package's
// own decodeState into JavaScript values ({"$date": ...} becomes a Date, ...), which go to
// setState / replaceState / setStateIf / replaceStateIf. Results are compared as the package's
// encodeState writes them: exactly the expected text when that text is what JavaScript values
// encode to (member order included), else the encoding of the expected text decoded the same
// way (a stored 1e+2 or 12345678901234567890123 reads as the JavaScript number it is; a $date
// with microseconds reads as a Date of its milliseconds: the codec's documented rules).
//
// A text input that JavaScript values cannot carry as written (malformed JSON, invalid UTF-8,
// a repeated member name, a $bigint of "01", a Set built from [1, 1.0], insignificant
// whitespace that the size cap counts) cannot reach the library through this API: where the
// vector expects the library to refuse it, the op is counted as refused when decodeState
// refuses it too, and is otherwise left out (and listed in the test's diagnostics); the ops
// after it still check that nothing was written. Where the vector expects such a text to be
// stored, the decoded value is written and the result compared in JavaScript's terms.
//
// Hooks: onStateChanged(next, prev) is the reference's signature, so an "events" op compares
// next and prev of each delivery (the patch and version it also lists are not given to
// JavaScript hooks).

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const test = require('node:test');
const { eachBackend, agentState } = require('./backends');

const { encodeState, decodeState, AgentError } = agentState;

const ROOT = path.resolve(__dirname, '..', '..', '..');
const VECTOR_DIR = path.join(ROOT, 'tests', 'conformance', 'vectors');

// --- the vector files, numbers kept as their text ---------------------------------------------

class Num {
  constructor(text) {
    this.text = text;
  }
}

// A JSON reader that keeps every number's text and every object's member order (as [key, value]
// pairs: a JavaScript object would move integer-like keys first).
function readJson(text) {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\r\n'.includes(text[i])) i++;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const pairs = [];
      ws();
      if (text[i] === '}') {
        i++;
        return { pairs };
      }
      for (;;) {
        ws();
        const key = string();
        ws();
        if (text[i++] !== ':') throw new Error(`vector file: ':' expected at ${i}`);
        pairs.push([key, value()]);
        ws();
        const d = text[i++];
        if (d === '}') return { pairs };
        if (d !== ',') throw new Error(`vector file: ',' or '}' expected at ${i}`);
      }
    }
    if (c === '[') {
      i++;
      const items = [];
      ws();
      if (text[i] === ']') {
        i++;
        return items;
      }
      for (;;) {
        items.push(value());
        ws();
        const d = text[i++];
        if (d === ']') return items;
        if (d !== ',') throw new Error(`vector file: ',' or ']' expected at ${i}`);
      }
    }
    if (c === '"') return string();
    const m = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i, i + 400));
    if (!m) throw new Error(`vector file: a value expected at ${i}`);
    i += m[0].length;
    if (m[0] === 'true') return true;
    if (m[0] === 'false') return false;
    if (m[0] === 'null') return null;
    return new Num(m[0]);
  };
  const string = () => {
    const start = i;
    if (text[i++] !== '"') throw new Error(`vector file: a string expected at ${start}`);
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const out = value();
  ws();
  if (i !== text.length) throw new Error('vector file: text after the value');
  return out;
}

// Plain access to a read object's members.
function get(obj, key) {
  if (obj === null || typeof obj !== 'object' || !obj.pairs) return undefined;
  const found = obj.pairs.find(([k]) => k === key);
  return found ? found[1] : undefined;
}
function has(obj, key) {
  return obj !== null && typeof obj === 'object' && !!obj.pairs && obj.pairs.some(([k]) => k === key);
}

/** A vector value as compact text: members in order, numbers as written, the library's escapes. */
function canonical(value) {
  if (value === null) return 'null';
  if (value === true || value === false) return String(value);
  if (value instanceof Num) return value.text;
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  return `{${value.pairs.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

/** A text field: a string, or pieces (strings and [string, count]) joined. */
function textForm(value) {
  if (typeof value === 'string') return value;
  return value.map((p) => (typeof p === 'string' ? p : p[0].repeat(Number(p[1].text)))).join('');
}

function expected(obj, field) {
  if (has(obj, field)) return canonical(get(obj, field));
  if (has(obj, `${field}_text`)) return textForm(get(obj, `${field}_text`));
  return undefined;
}

// --- JSON text to JavaScript values -----------------------------------------------------------

const NOT_A_VALUE = Symbol('not a JavaScript value');

/**
 * What an input text is in JavaScript: `{ value, exact }`; `exact` when encodeState writes the
 * value back as the very text (so the library gets the vector's input); `value === NOT_A_VALUE`
 * when decodeState refuses the text (with `why`).
 */
function fromText(text) {
  let value;
  try {
    value = decodeState(text);
  } catch (error) {
    return { value: NOT_A_VALUE, exact: false, why: `decodeState refuses it (${error.name}: ${error.message})` };
  }
  let encoded;
  try {
    encoded = encodeState(value);
  } catch {
    // A value the package refuses to write (an invalid Date, Infinity, a Map entry without a
    // value): the API refuses it too, which is what the call then checks (its status; the
    // message is the package's own, not the library's).
    return { value, exact: true, refusedByPackage: true };
  }
  if (encoded === text) return { value, exact: true };
  return { value, exact: false, merged: mergedKeys(value) };
}

// True when the value holds a Map with two keys, or a Set with two items, that encode alike:
// JavaScript kept apart what the text wrote differently ([1] and [1.0] read as two arrays [1]),
// and the library, comparing by the text it is given, sees one key twice.
function mergedKeys(value) {
  if (value === null || typeof value !== 'object') return false;
  if (value instanceof Map || value instanceof Set) {
    const seen = new Set();
    for (const key of value.keys()) {
      const text = encodeState(key);
      if (seen.has(text)) return true;
      seen.add(text);
    }
    for (const item of value.values()) if (mergedKeys(item)) return true;
    if (value instanceof Map) for (const key of value.keys()) if (mergedKeys(key)) return true;
    return false;
  }
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer || value instanceof Date || value instanceof RegExp) return false;
  return Object.values(value).some(mergedKeys);
}

function inputOf(op) {
  if (has(op, 'input')) return fromText(canonical(get(op, 'input')));
  if (has(op, 'input_hex')) {
    const bytes = Buffer.from(get(op, 'input_hex'), 'hex');
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return { value: NOT_A_VALUE, exact: false, why: 'a JavaScript string cannot hold invalid UTF-8' };
    }
    return fromText(text);
  }
  return fromText(textForm(get(op, 'input_text')));
}

/** The text a result is compared as: what encodeState writes for it. */
function resultText(value) {
  return encodeState(value);
}

/** The text a result must have: the expected text itself when JavaScript keeps it, else its
 *  decoding written again (the value JavaScript reads for it). */
function wantText(text) {
  const { value, exact } = fromText(text);
  if (exact) return text;
  assert.notEqual(value, NOT_A_VALUE, `the expected text does not decode: ${text.slice(0, 200)}`);
  return encodeState(value);
}

function camel(name) {
  return name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
}

// The open options as the Node API takes them: camelCase names, initial_state decoded.
function optionsOf(vectorOptions) {
  const out = {};
  let exact = true;
  for (const [key, value] of vectorOptions ? vectorOptions.pairs : []) {
    if (key === 'initial_state') {
      const decoded = fromText(canonical(value));
      if (!decoded.exact) exact = false;
      out.initialState = decoded.value === NOT_A_VALUE ? undefined : decoded.value;
    } else {
      out[camel(key)] = plain(value, true);
    }
  }
  return { options: out, exact };
}

function plain(value, camelKeys) {
  if (value instanceof Num) return Number(value.text);
  if (Array.isArray(value)) return value.map((v) => plain(v, camelKeys));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(value.pairs.map(([k, v]) => [camelKeys ? camel(k) : k, plain(v, camelKeys)]));
  }
  return value;
}

function statusOf(error) {
  if (error instanceof AgentError) return error.code;
  throw error;
}

// --- running one vector -----------------------------------------------------------------------

class Mismatch extends Error {}

class VectorRun {
  constructor(vector, store, t) {
    this.vector = vector;
    this.store = store;
    this.t = t;
    this.agent = null;
    this.events = [];
    this.leftOut = [];
  }

  async open(vectorOptions) {
    if (this.agent !== null) {
      await this.agent.close();
      this.agent = null;
    }
    const { options } = optionsOf(vectorOptions);
    const failWhen = get(this.vector, 'hook_fails_when');
    const rejectWhen = get(this.vector, 'validator_rejects');
    if (get(this.vector, 'hooks') === true || failWhen !== undefined) {
      options.onStateChanged = (next, prev) => {
        this.events.push([encodeState(next), encodeState(prev)]);
        if (failWhen !== undefined && Object.hasOwn(next, failWhen)) throw new Error(`the hook fails on the member ${failWhen}`);
      };
    }
    if (rejectWhen !== undefined) {
      options.validator = (next) => (Object.hasOwn(next, rejectWhen) ? `the state may not have the member ${rejectWhen}` : undefined);
    }
    this.agent = await agentState.Agent.open(this.store.path, { ...options, ...this.store.options });
  }

  async run() {
    try {
      let status = 'AGENT_OK';
      let message = '';
      const openOptions = get(this.vector, 'open');
      const wantOpen = get(this.vector, 'open_status') || 'AGENT_OK';
      if (wantOpen !== 'AGENT_OK' && !optionsOf(openOptions).exact) {
        this.leftOut.push(`open: its initial_state is not a JavaScript value as written (${canonical(get(openOptions, 'initial_state'))})`);
        return;
      }
      try {
        await this.open(openOptions);
      } catch (error) {
        status = statusOf(error);
        message = error.message;
      }
      this.checkStatus('open', wantOpen, get(this.vector, 'open_message'), status, message);
      if (has(this.vector, 'open_status')) return;
      const ops = get(this.vector, 'ops') || [];
      for (let k = 0; k < ops.length; k++) {
        try {
          await this.runOp(ops[k]);
        } catch (error) {
          if (error instanceof Mismatch) throw new Mismatch(`op ${k + 1} (${get(ops[k], 'op')}): ${error.message}`);
          throw error;
        }
      }
    } finally {
      if (this.agent !== null) await this.agent.close();
    }
  }

  checkStatus(what, want, part, got, message) {
    if (got !== want) throw new Mismatch(`${what}: got ${got} (${message}), want ${want}`);
    if (got !== 'AGENT_OK' && part !== undefined && !message.includes(part)) {
      throw new Mismatch(`${what}: message ${JSON.stringify(message)} does not contain ${JSON.stringify(part)}`);
    }
  }

  async runOp(op) {
    const kind = get(op, 'op');
    if (kind === 'events') {
      this.checkEvents(get(op, 'events'));
      return;
    }
    const want = get(op, 'status') || 'AGENT_OK';
    let input;
    if (['set', 'replace', 'set_if', 'replace_if', 'patch', 'patch_if'].includes(kind)) {
      input = inputOf(op);
      if (!input.exact && want !== 'AGENT_OK') {
        // The vector's input, as written, is not a JavaScript value: the library cannot be
        // given it through this API.
        if (input.value === NOT_A_VALUE) return; // refused before any call: nothing written
        this.leftOut.push(`${kind} ${canonical(get(op, 'input_text') || get(op, 'input') || null).slice(0, 120)}: decodes to a value that is not the text (expected ${want})`);
        return;
      }
      if (input.value === NOT_A_VALUE) throw new Mismatch(`the input does not decode (${input.why}), but the vector expects it stored`);
      if (input.merged) {
        this.leftOut.push(`${kind}: its JavaScript value has two Map keys or Set items that the text told apart (1.0 and 1)`);
        return;
      }
    }
    let status = 'AGENT_OK';
    let message = '';
    let result;
    let version;
    try {
      [result, version] = await this.call(kind, op, input);
    } catch (error) {
      if (error instanceof Mismatch) throw error;
      status = statusOf(error);
      message = error.message;
    }
    let wanted = want;
    if (input && input.refusedByPackage && want === 'AGENT_ERR_JSON' && status === 'AGENT_ERR_CODEC' && /nesting deeper than 64/.test(message)) {
      // A value nested past the library parser's 128 levels: the text is malformed JSON for the
      // library, while a JavaScript value that deep is a codec error in every binding (the
      // binding values' decision 3), which is what this API was given.
      wanted = 'AGENT_ERR_CODEC';
    }
    this.checkStatus(kind, wanted, input && input.refusedByPackage ? undefined : get(op, 'message'), status, message);
    if (status === 'AGENT_OK' && kind !== 'reopen') {
      const text = expected(op, 'expect');
      if (text !== undefined) {
        const got = resultText(result);
        const wanted = wantText(text);
        if (got !== wanted) throw new Mismatch(`result ${got.slice(0, 400)}, want ${wanted.slice(0, 400)}`);
      }
    }
    if (has(op, 'version')) {
      const now = version !== undefined ? version : (await this.agent.getStateVersioned()).version;
      if (now !== Number(get(op, 'version').text)) throw new Mismatch(`version ${now}, want ${get(op, 'version').text}`);
    }
  }

  async call(kind, op, input) {
    const agent = this.agent;
    if (kind === 'reopen') {
      await this.open(has(op, 'open') ? get(op, 'open') : get(this.vector, 'open'));
      return [undefined, undefined];
    }
    if (kind === 'get') {
      const { state, version } = await agent.getStateVersioned();
      return [state, version];
    }
    if (kind === 'set') return [await agent.setState(input.value), undefined];
    if (kind === 'replace') return [await agent.replaceState(input.value), undefined];
    if (kind === 'patch') return [await agent.patchState(input.value), undefined];
    if (kind === 'patch_if') {
      const { state, version } = await agent.patchStateIf(Number(get(op, 'if_version').text), input.value);
      return [state, version];
    }
    if (kind === 'set_if' || kind === 'replace_if') {
      const text = get(op, 'if_version').text;
      // A version beyond a double's whole numbers is given as a BigInt.
      const ifVersion = Number.isSafeInteger(Number(text)) ? Number(text) : BigInt(text);
      const write = kind === 'set_if' ? agent.setStateIf(ifVersion, input.value) : agent.replaceStateIf(ifVersion, input.value);
      const { state, version } = await write;
      return [state, version];
    }
    throw new Mismatch(`unknown op ${kind}`);
  }

  checkEvents(want) {
    if (want.length !== this.events.length) {
      throw new Mismatch(`${this.events.length} deliveries, want ${want.length}: ${JSON.stringify(this.events).slice(0, 600)}`);
    }
    want.forEach((w, k) => {
      const [next, prev] = this.events[k];
      if (next !== wantText(expected(w, 'next'))) throw new Mismatch(`delivery ${k + 1} next ${next}, want ${expected(w, 'next')}`);
      if (prev !== wantText(expected(w, 'prev'))) throw new Mismatch(`delivery ${k + 1} prev ${prev}, want ${expected(w, 'prev')}`);
    });
    this.events = [];
  }
}

// --- the tests --------------------------------------------------------------------------------

const FILES = fs.readdirSync(VECTOR_DIR).filter((f) => f.endsWith('.json')).sort();

// A vector restricted to some runners says why the others cannot express it: options given as
// named parameters or typed fields (an unknown option, Go's zero and negative durations), or raw
// text for a call that takes values. The Node API takes its options as one plain object, so it
// runs the restricted vectors made of options and values only; those needing raw text it cannot
// send are skipped.
function needsRawText(vector) {
  return (get(vector, 'ops') || []).some((op) => has(op, 'input_text') || has(op, 'input_hex'));
}

function skipReason(vector, backend) {
  const runners = get(vector, 'runners');
  if (runners !== undefined && !runners.includes('node') && needsRawText(vector)) {
    return `for the runners ${runners.join(', ')}: ${get(vector, 'runners_why') || ''}`;
  }
  const backends = get(vector, 'backends');
  if (backends !== undefined && !backends.includes(backend)) {
    return `not on ${backend}: ${get(vector, 'backends_why') || ''}`;
  }
  return undefined;
}

let count = 0;
for (const file of FILES) {
  const vectors = get(readJson(fs.readFileSync(path.join(VECTOR_DIR, file), 'utf8')), 'vectors');
  for (const vector of vectors) {
    count += 1;
    const name = `conformance ${file.replace(/\.json$/, '')}: ${get(vector, 'name')}`;
    eachBackend(name, async (t, store) => {
      const why = skipReason(vector, store.name);
      if (why !== undefined) {
        t.skip(why);
        return;
      }
      const run = new VectorRun(vector, store, t);
      await run.run();
      for (const note of run.leftOut) t.diagnostic(`left out (not expressible as JavaScript values): ${note}`);
    });
  }
}

test('the conformance runner reads every vector file', () => {
  assert.ok(['cas.json', 'codec.json', 'errors.json', 'hooks.json', 'merge.json'].every((f) => FILES.includes(f)), FILES.join(' '));
  assert.ok(count >= 100, `${count} vectors`);
});

test('the runner keeps a vector number\'s text and member order', () => {
  const read = readJson('{"b":1.50,"a":[1E2,{"2":null,"1":"x"}],"s":"caf\\u00e9"}');
  assert.equal(canonical(read), '{"b":1.50,"a":[1E2,{"2":null,"1":"x"}],"s":"café"}');
});
