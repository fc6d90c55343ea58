'use strict';
// The public RFC 6902 suite (../shared/corpora/json-patch-tests) through the package, on each
// backend: tests/conformance/json_patch/cases.py turns it into cases (see its docstring), and for
// each case a fresh agent stores the case's state (replaceState), applies its patch
// (patchState), and checks the outcome: a case with `expect` must apply, its result must equal
// `expect` (deepStrictEqual, and the library's own equality: the case's `verify`, a `test` of
// the whole state, must hold and commit nothing), and what is stored must be what was returned;
// a case with `error` must be refused with InvalidArgumentError, PathError, TestFailedError or
// CodecError, the state and version as they were. The runner of the core
// (crates/agent_state/tests/behaviour/json_patch.rs) does the same.
//
// Each run writes target/conformance/json-patch/node-<backend>.txt, one `ID STATUS` line per case
// (AGENT_OK or the error's AGENT_ERR_* code); tests/conformance/json_patch/compare.py checks that
// every language's run agrees.
//
// How the texts reach the library: the package has no entry point taking JSON text, so the
// case's `state` and `patch` go through JSON.parse and the package's codec. That is lossless for
// these cases (cases.py writes them compact, and no number of theirs is spelled otherwise than
// JavaScript spells it); the runner checks it for each case (encode(parse(text)) must be the
// text), so a case where it would not be is a failure here, never a silent change of the case.
// Without the corpus the test is skipped with a notice; under CI=true that is a failure.

const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const test = require('node:test');

const { eachBackend, newAgentId, CI, agentState } = require('./backends');

const { Agent, AgentError, InvalidArgumentError, PathError, TestFailedError, CodecError, encodeState } = agentState;

const root = path.resolve(__dirname, '..', '..', '..');
const corpus = path.resolve(root, '..', 'shared', 'corpora', 'json-patch-tests');
const results = path.join(root, 'target', 'conformance', 'json-patch');

// The refusals a case with `error` may earn (as the core's runner accepts them).
const REFUSALS = [InvalidArgumentError, PathError, TestFailedError, CodecError];

// The cases, generated into this test's own directory (another runner may be writing the shared
// file in target/ at the same time).
function loadCases(dir) {
  const out = path.join(dir, 'json-patch-cases.json');
  childProcess.execFileSync('python3', [path.join(root, 'tests', 'conformance', 'json_patch', 'cases.py'), out], { stdio: ['ignore', 'ignore', 'inherit'] });
  return JSON.parse(fs.readFileSync(out, 'utf8')).cases;
}

// The case's text as the package will send it; a failure when the way through JSON.parse and
// the codec would change it.
function verbatim(id, what, text) {
  const value = JSON.parse(text);
  const sent = encodeState(value);
  assert.equal(sent, text, `${id}: its ${what} would not reach the library as the case wrote it`);
  return value;
}

function statusOf(error) {
  if (error === undefined) return 'AGENT_OK';
  return error instanceof AgentError ? error.code : `NOT_AN_AGENT_ERROR(${error && error.name})`;
}

if (!fs.existsSync(corpus)) {
  if (CI) {
    test('the public RFC 6902 suite passes through the package', () => {
      throw new Error(`no RFC 6902 corpus at ${corpus} (CI has ../shared beside the checkout)`);
    });
  } else {
    test('the public RFC 6902 suite passes through the package', { skip: `no RFC 6902 corpus at ${corpus}: skipped` }, () => {});
  }
} else {
  eachBackend('the public RFC 6902 suite passes through the package', async (t, store) => {
    const cases = loadCases(store.dir);
    assert.ok(cases.length > 0, 'cases.py wrote no cases');
    const lines = [];
    const failures = [];
    for (const [n, c] of cases.entries()) {
      // A fresh agent per case: its own id in the test's store (a fresh one on PostgreSQL).
      const agentId = store.postgres ? newAgentId() : `case${n}`;
      const agent = await Agent.open(store.path, { agentId });
      try {
        const state = verbatim(c.id, 'state', c.state);
        const patch = verbatim(c.id, 'patch', c.patch);
        await agent.replaceState(state);
        const before = await agent.getStateVersioned();
        let result;
        let error;
        try {
          result = await agent.patchState(patch);
        } catch (e) {
          error = e;
        }
        lines.push(`${c.id} ${statusOf(error)}`);
        if (c.expect !== undefined) {
          if (error !== undefined) {
            failures.push(`${c.id}: refused (${error.name}: ${error.message})`);
            continue;
          }
          const want = JSON.parse(c.expect);
          try {
            assert.deepStrictEqual(result, want);
          } catch {
            failures.push(`${c.id}: got ${JSON.stringify(result)}, expected ${c.expect}`);
          }
          // The library's own equality; a test holds and commits nothing.
          const applied = await agent.getStateVersioned();
          try {
            await agent.patchState(JSON.parse(c.verify));
          } catch (e) {
            failures.push(`${c.id}: the library's test of the result failed (${e.name}: ${e.message})`);
          }
          const after = await agent.getStateVersioned();
          assert.equal(after.version, applied.version, `${c.id}: verify committed something`);
          assert.deepStrictEqual(after.state, result, `${c.id}: what was stored is not what was returned`);
        } else if (c.error !== undefined) {
          if (error === undefined) {
            failures.push(`${c.id}: applied as ${JSON.stringify(result)}, expected an error (${c.error})`);
            continue;
          }
          assert.ok(REFUSALS.some((cls) => error instanceof cls), `${c.id}: ${error.name}: ${error.message}`);
          const after = await agent.getStateVersioned();
          assert.deepStrictEqual(after, before, `${c.id}: a refused patch wrote something`);
        } else if (error !== undefined) {
          failures.push(`${c.id}: refused (${error.name}: ${error.message}), expected to apply`);
        }
      } finally {
        await agent.close();
      }
    }
    assert.deepEqual(failures, []);
    fs.mkdirSync(results, { recursive: true });
    fs.writeFileSync(path.join(results, `node-${store.name}.txt`), `${lines.join('\n')}\n`);
  }, { timeout: 600_000 });
}
