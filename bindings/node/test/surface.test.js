'use strict';
// The package against the library's surface description (include/agent_state_surface.json,
// generated from the core's own definitions of its open options and statuses): lib/errors.js
// has one class per status, with its number, code and the name every binding gives it; index.js
// exports them; index.d.ts declares them with the same numbers and codes, and its OpenOptions
// declares every library option in camelCase and nothing else but the JavaScript-only ones.
// When the library gains an option or a status, these tests fail until the package has it.
//
// index.d.ts is read with the TypeScript compiler (a devDependency: run-tests.sh installs it),
// so inherited members (ConnectionOptions) count as the checker sees them.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const root = path.resolve(here, '..', '..');
const surfaceFile = process.env.AGENT_STATE_SURFACE || path.join(root, 'include', 'agent_state_surface.json');
const surface = JSON.parse(fs.readFileSync(surfaceFile, 'utf8'));

const errors = require('../lib/errors');
const pkg = require('..');

// The class of each status, by its code: the names every binding uses (Python's
// agent_state.errors, Go's Err*, C++'s Status). A status missing here fails the test below.
const CLASS_OF_CODE = {
  AGENT_ERR_INVALID_ARGUMENT: 'InvalidArgumentError',
  AGENT_ERR_BAD_HANDLE: 'BadHandleError',
  AGENT_ERR_JSON: 'JSONError',
  AGENT_ERR_CODEC: 'CodecError',
  AGENT_ERR_TOO_LARGE: 'StateTooLargeError',
  AGENT_ERR_STORAGE: 'StorageError',
  AGENT_ERR_BUSY: 'BusyError',
  AGENT_ERR_HOOK: 'HookError',
  AGENT_ERR_CONFLICT: 'ConflictError',
  AGENT_ERR_REJECTED: 'RejectedError',
  AGENT_ERR_GAP: 'GapError',
  AGENT_ERR_UNAVAILABLE: 'UnavailableError',
  AGENT_ERR_AUTH: 'AuthError',
  AGENT_ERR_CANCELLED: 'CallCancelledError',
  AGENT_ERR_NEWER_SCHEMA: 'NewerSchemaError',
  AGENT_ERR_MIGRATION: 'MigrationError',
  AGENT_ERR_PATH: 'PathError',
  AGENT_ERR_TEST_FAILED: 'TestFailedError',
  AGENT_ERR_PANIC: 'PanicError',
};

// The keys of OpenOptions that are the package's own (JavaScript hooks and the AbortSignal), not
// library options. initialState is both: the library's initial_state, which the package also
// takes as a function.
const JS_ONLY = new Set(['onStateChanged', 'validator', 'signal']);

const errorStatuses = surface.statuses.filter((s) => s.code !== 0);

function camel(name) {
  return name.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

test('the surface description has options and statuses', () => {
  assert.ok(surface.options.length > 0);
  assert.ok(errorStatuses.length > 0);
  assert.ok(surface.statuses.some((s) => s.code === 0 && s.name === 'AGENT_OK'));
});

test('lib/errors.js has one class per status, with its number, code and name', () => {
  for (const status of errorStatuses) {
    const name = CLASS_OF_CODE[status.name];
    assert.ok(name, `the library has the status ${status.name} (${status.code}): name its class in CLASS_OF_CODE and add it to lib/errors.js`);
    const cls = errors[name];
    assert.equal(typeof cls, 'function', `lib/errors.js lacks ${name} (${status.name})`);
    assert.equal(cls.name, name);
    assert.equal(cls.status, status.code, `${name}.status`);
    assert.equal(cls.code, status.name, `${name}.code`);
    assert.equal(errors.BY_STATUS.get(status.code), cls, `BY_STATUS maps ${status.code} to ${name}`);
    const instance = new cls('m');
    assert.ok(instance instanceof errors.AgentError && instance instanceof Error);
    assert.equal(instance.name, name);
    assert.equal(instance.status, status.code);
    assert.equal(instance.code, status.name);
    assert.equal(instance.message, 'm');
    // What the addon's error for this status turns into.
    const translated = errors.translate(new Error(`${status.code}\u0001from the addon`));
    assert.ok(translated instanceof cls, `an addon error of status ${status.code} becomes ${name}`);
    assert.equal(translated.message, 'from the addon');
  }
  assert.equal(errors.PanicError.status, 99);
  assert.equal(errors.BadHandleError.code, 'AGENT_ERR_BAD_HANDLE');
  // Nothing more than the surface's statuses.
  const known = new Set(errorStatuses.map((s) => s.code));
  const extra = [...errors.BY_STATUS.keys()].filter((code) => !known.has(code));
  assert.deepEqual(extra, [], 'lib/errors.js has statuses the library does not');
  const unused = Object.keys(CLASS_OF_CODE).filter((code) => !errorStatuses.some((s) => s.name === code));
  assert.deepEqual(unused, [], 'CLASS_OF_CODE names statuses the library does not have');
});

test('a conflict and a gap carry their fields', () => {
  const conflict = errors.translate(new Error('9\u0001conflict\u0001{"expected":1,"actual":2}'));
  assert.ok(conflict instanceof errors.ConflictError);
  assert.equal(conflict.expected, 1);
  assert.equal(conflict.actual, 2);
  const gap = errors.translate(new Error('11\u0001gap\u0001{"first":5,"last":9}'));
  assert.ok(gap instanceof errors.GapError);
  assert.equal(gap.first, 5);
  assert.equal(gap.last, 9);
});

test('index.js exports every error class, the same objects as lib/errors.js', () => {
  assert.equal(pkg.AgentError, errors.AgentError);
  for (const name of Object.values(CLASS_OF_CODE)) {
    assert.equal(pkg[name], errors[name], `index.js exports ${name}`);
  }
});

test('index.js exports what index.d.ts declares, and the other way round', () => {
  const { declared } = readDeclarations();
  const values = [...declared.values].sort();
  assert.deepEqual(Object.keys(pkg).sort(), values);
});

test("index.d.ts declares each error class with its status's number and code", () => {
  const { errorClasses } = readDeclarations();
  const want = new Map(errorStatuses.map((s) => [CLASS_OF_CODE[s.name], s]));
  assert.deepEqual([...errorClasses.keys()].sort(), [...want.keys()].sort(), 'the classes extending AgentError');
  for (const [name, declared] of errorClasses) {
    const status = want.get(name);
    assert.equal(declared.staticStatus, String(status.code), `${name}: static readonly status: ${status.code}`);
    assert.equal(declared.staticCode, JSON.stringify(status.name), `${name}: static readonly code: '${status.name}'`);
    assert.equal(declared.status, String(status.code), `${name}: readonly status: ${status.code}`);
    assert.equal(declared.code, JSON.stringify(status.name), `${name}: readonly code: '${status.name}'`);
  }
});

test("index.d.ts's OpenOptions declares every library option in camelCase, and only those and the JavaScript-only ones", () => {
  const { openOptions } = readDeclarations();
  const want = surface.options.map((o) => camel(o.name));
  const missing = want.filter((name) => !openOptions.has(name));
  assert.deepEqual(missing, [], 'OpenOptions lacks these library options (add them to index.d.ts)');
  const unknown = [...openOptions.keys()].filter((name) => !want.includes(name) && !JS_ONLY.has(name));
  assert.deepEqual(unknown, [], 'OpenOptions has keys the library does not (or JS_ONLY lacks them)');
  for (const name of JS_ONLY) assert.ok(openOptions.has(name), `OpenOptions lacks ${name}`);
  // Each declared option is optional and documented.
  for (const [name, member] of openOptions) {
    assert.ok(member.optional, `OpenOptions.${name} is optional`);
    assert.ok(member.doc.length > 0, `OpenOptions.${name} has a doc comment`);
  }
  // The choices of a choice option are the declared literal union.
  for (const option of surface.options) {
    if (option.kind.type !== 'choice') continue;
    const declared = openOptions.get(camel(option.name)).type;
    const literals = declared.split('|').map((s) => s.trim().replace(/^['"]|['"]$/g, '')).sort();
    assert.deepEqual(literals, [...option.kind.choices].sort(), `OpenOptions.${camel(option.name)}: ${declared}`);
  }
  // A retention option's keys are the declared ones.
  for (const option of surface.options) {
    if (option.kind.type !== 'retention') continue;
    const { retentionKeys } = readDeclarations();
    assert.deepEqual(retentionKeys.sort(), option.kind.keys.map(camel).sort(), `the keys of ${camel(option.name)}`);
  }
});

test("the store functions' options are among OpenOptions' (a connection's options)", () => {
  const { openOptions, connectionOptions } = readDeclarations();
  assert.ok(connectionOptions.size > 0);
  for (const name of connectionOptions.keys()) assert.ok(openOptions.has(name), name);
});

// ---------------------------------------------------------------------------------------------
// index.d.ts as the TypeScript checker sees it.

let cached;
function readDeclarations() {
  if (cached) return cached;
  let ts;
  try {
    ts = require(path.join(here, 'node_modules', 'typescript'));
  } catch (error) {
    throw new Error(`the TypeScript compiler is missing: run \`npm ci\` in ${here} (run-tests.sh does) (${error.message})`);
  }
  const file = path.join(here, 'index.d.ts');
  // tsconfig.json's compiler options (strict, the Node types), with index.d.ts alone.
  const config = ts.getParsedCommandLineOfConfigFile(path.join(here, 'tsconfig.json'), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic(d) {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  });
  const program = ts.createProgram([file], { ...config.options, noEmit: true });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  assert.deepEqual(
    diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    [],
    'index.d.ts type-checks',
  );
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const moduleSymbol = checker.getSymbolAtLocation(source);
  const exports = checker.getExportsOfModule(moduleSymbol);
  const values = exports.filter((s) => s.flags & (ts.SymbolFlags.Value)).map((s) => s.name);
  const byName = new Map(exports.map((s) => [s.name, s]));

  function members(interfaceName) {
    const symbol = byName.get(interfaceName);
    assert.ok(symbol, `index.d.ts exports ${interfaceName}`);
    const type = checker.getDeclaredTypeOfSymbol(symbol);
    const out = new Map();
    for (const property of checker.getPropertiesOfType(type)) {
      const declaration = property.valueDeclaration || property.declarations[0];
      out.set(property.name, {
        optional: (property.flags & ts.SymbolFlags.Optional) !== 0,
        doc: ts.displayPartsToString(property.getDocumentationComment(checker)),
        type: declaration.type ? declaration.type.getText(source) : '',
      });
    }
    return out;
  }

  const errorClasses = new Map();
  for (const statement of source.statements) {
    if (!ts.isClassDeclaration(statement) || !statement.name) continue;
    const heritage = (statement.heritageClauses || []).flatMap((h) => h.types.map((t) => t.expression.getText(source)));
    if (!heritage.includes('AgentError')) continue;
    const entry = {};
    for (const member of statement.members) {
      if (!ts.isPropertyDeclaration(member) || !member.type) continue;
      const isStatic = (ts.getModifiers(member) || []).some((m) => m.kind === ts.SyntaxKind.StaticKeyword);
      const key = member.name.getText(source);
      const text = member.type.getText(source).replace(/'/g, '"');
      if (key === 'status') entry[isStatic ? 'staticStatus' : 'status'] = text;
      if (key === 'code') entry[isStatic ? 'staticCode' : 'code'] = text;
    }
    errorClasses.set(statement.name.text, entry);
  }

  cached = {
    declared: { values },
    openOptions: members('OpenOptions'),
    connectionOptions: members('ConnectionOptions'),
    retentionKeys: [...members('ChangeLogRetention').keys()],
    errorClasses,
  };
  return cached;
}

// ---------------------------------------------------------------------------------------------
// The declarations as a user's strict TypeScript sees them: what the package takes type-checks,
// and each line under `@ts-expect-error` (what it refuses, or what the types must keep apart)
// is an error, else tsc reports the unused directive.

const TYPING_CASES = `
import {
  Agent, openAgent, listAgents, deleteAgent, expireAgents, encodeState, decodeState,
  AgentError, ConflictError, GapError, CallCancelledError, MergePatch, OpenOptions, Versioned,
  NewerSchemaError, MigrationError, SchemaStepSpec, JsonPatchOperation, PathError, TestFailedError,
  ChangeInfo,
} from "agent-state";

interface S extends Record<string, unknown> {
  status: "idle" | "busy";
  when: Date;
  tags: Set<string>;
  job: { id: string; step: number; note?: string };
  list: number[];
  big: bigint;
  bytes: Uint8Array;
}
const fresh = (): S => ({ status: "idle", when: new Date(0), tags: new Set(), job: { id: "j", step: 0 }, list: [], big: 0n, bytes: new Uint8Array() });

class A extends Agent<S> {
  protected override initialState(): S { return fresh(); }
  protected override onStateChanged(next: S, prev: S): void { void next; void prev; }
}

export async function cases(signal: AbortSignal): Promise<void> {
  const a: A = await A.open("x.db", { agentId: "x", busyTimeoutMs: 1, changeLog: { keepLast: 3, keepSeconds: 60 }, synchronous: "normal", signal });
  const merged: S = await a.setState({ job: { step: 3, note: null }, when: new Date(), status: null }, { signal, expected: 2 });
  const v: Versioned<S> = await a.setStateIf(0, { list: [1] });
  const w: Versioned<S> = await a.replaceStateIf(1n, fresh(), { signal });
  const at: S = await a.stateAt(1);
  const back: Versioned<S> = await a.restore(1);
  const n: number = await a.poll();
  const stop: () => void = a.subscribe((next, prev) => { void next.status; void prev.job.id; });
  a.setValidator((next, prev, patch) => (patch === null || next.job.step >= prev.job.step) || "steps only go up");
  a.setValidator(null);
  for await (const c of a.changes({ after: 0, follow: true, intervalMs: 10, signal })) {
    const d: Date = c.at; const p: MergePatch<S> | JsonPatchOperation[] | null = c.patch; void d; void p; void c.next.status;
    if (c.kind === "merge") { const m: MergePatch<S> = c.patch; void m; }
    if (c.kind === "json_patch") { const ops: JsonPatchOperation[] = c.patch; void ops[0]!.op; }
    if (c.kind === "replace") { const none: null = c.patch; void none; }
  }
  const cap: number = a.maxValueBytes; const path: string | undefined = a.path; const open: boolean = a.isOpen;
  // @ts-expect-error a status the state does not have
  await a.setState({ status: "gone" });
  // @ts-expect-error a Date is one value of the codec, replaced whole: not merged member by member
  await a.setState({ when: { getTime: null } });
  // @ts-expect-error an array is replaced whole: its patch is the whole array
  await a.setState({ list: [null] });
  // @ts-expect-error the library's option names are camelCase here
  await A.open("x", { agent_id: "x" });
  // @ts-expect-error synchronous is "full" or "normal"
  await A.open("x", { synchronous: "off" });
  // @ts-expect-error initialState is protected, as in the reference
  a.initialState();
  // @ts-expect-error onStateChanged is protected, as in the reference
  await a.onStateChanged(fresh(), fresh());
  // @ts-expect-error replaceState takes the whole state
  await a.replaceState({ status: "idle" });
  // @ts-expect-error a validator is synchronous
  a.setValidator(async () => true);
  // @ts-expect-error the initial state option is the agent's state type
  await A.open("x", { initialState: { status: "idle" } });
  a.setSchemaStep(0, (old: { nick?: string }) => ({ name: old.nick ?? "" }));
  a.setSchemaStep(0, null);
  const sv: number = a.schemaVersion;
  const stored: { state: Record<string, unknown>; schema: number } = await a.stateAtStored(1);
  const upgraded: S = await a.upgradeState(stored.state, stored.schema);
  for await (const c of a.changes()) {
    const k: "merge" | "json_patch" | "replace" | "migration" = c.kind; const from: number | null = c.migratedFrom; const sch: number = c.schema; void [k, from, sch];
  }
  a.subscribe((next, prev, change) => { void [next, prev, change.kind, change.schema, change.migratedFrom, change.patch]; });
  a.subscribe((_n, _p, change: ChangeInfo<S>) => { if (change.kind === "json_patch") { const path: string = change.patch[0]!.path; void path; } });
  a.setValidator((_n, _p, patch, change) => change.kind !== "json_patch" || (Array.isArray(patch) && patch.every((o) => o.op !== "remove")));
  const appended: S = await a.patchState([{ op: "add", path: "/list/-", value: 3 }, { op: "test", path: "/status", value: "idle" }], { signal, expected: 4n });
  const moved: Versioned<S> = await a.patchStateIf(5, [{ op: "move", from: "/job/note", path: "/job/id" }, { op: "copy", from: "/when", path: "/job/note" }, { op: "remove", path: "/list/0" }, { op: "replace", path: "/when", value: new Date() }]);
  const ops: readonly JsonPatchOperation[] = [{ op: "add", path: "/tags", value: new Set(["a"]) }];
  await a.patchState(ops);
  const one: string = await a.getPath<string>("/job/id", { signal });
  const anything: unknown = await a.getPath("");
  const last: number[] = await a.getTail<number>("/list", 1);
  void [appended, moved, one, anything, last];
  // @ts-expect-error an op is one of RFC 6902's six
  await a.patchState([{ op: "merge", path: "/x", value: 1 }]);
  // @ts-expect-error an add needs its value
  await a.patchState([{ op: "add", path: "/x" }]);
  // @ts-expect-error a move needs from
  await a.patchState([{ op: "move", path: "/x" }]);
  // @ts-expect-error a JSON Patch is an array of operations
  await a.patchState({ op: "remove", path: "/x" });
  try { await a.getPath("/nope"); } catch (e) {
    if (e instanceof PathError) { const s17: 17 = e.status; const at: number | null = e.operation; const pp: string = e.path; void [s17, at, pp]; }
    if (e instanceof TestFailedError) { const c18: "AGENT_ERR_TEST_FAILED" = e.code; const at: number = e.operation; void [c18, at, e.path]; }
  }
  await A.open("x", { schemaVersion: 2, schemaSteps: [{ from: 0, ops: [{ op: "default", path: "/tags", value: [] }, { op: "rename", path: "/nick", to: "name" }] }, { from: 1, upgrade: (s) => ({ ...s, status: "idle" }) }] });
  // @ts-expect-error a declarative op is one of the six
  await A.open("x", { schemaSteps: [{ from: 0, ops: [{ op: "drop", path: "/x" }] }] });
  // @ts-expect-error a rename needs its new name
  await A.open("x", { schemaSteps: [{ from: 0, ops: [{ op: "rename", path: "/x" }] }] });
  class B extends Agent<S> {
    static override schemaVersion = 2;
    static override schemaSteps: SchemaStepSpec[] = [{ from: 0, ops: [] }, { from: 1, upgrade: (s) => s }];
  }
  void [sv, upgraded, B];
  try { await a.getState(); } catch (e) {
    if (e instanceof NewerSchemaError) { const s15: 15 = e.status; void [s15, e.stored, e.declared]; }
    if (e instanceof MigrationError) { const c16: "AGENT_ERR_MIGRATION" = e.code; void [c16, e.stepFrom]; }
  }
  await a.close();
  await a[Symbol.asyncDispose]();

  const plain = await openAgent<{ n: number }>("x", {
    initialState: () => ({ n: 0 }),
    onStateChanged: async (next, prev) => { void (next.n - prev.n); },
    validator: (next) => next.n >= 0,
  });
  const count: number = (await plain.getState()).n;
  // @ts-expect-error n is a number
  await plain.setState({ n: "1" });
  const untyped = await openAgent("x");
  await untyped.setState({ anything: [1, "two", { three: 3n }] });

  try {
    await plain.close();
  } catch (e) {
    if (e instanceof ConflictError) { const diff: number = e.actual - e.expected; const s9: 9 = e.status; void diff; void s9; }
    if (e instanceof GapError) { void (e.first + e.last); }
    if (e instanceof CallCancelledError) { const c: "AGENT_ERR_CANCELLED" = e.code; void c; }
    if (e instanceof AgentError) { const st: number = e.status; const co: string = e.code; void st; void co; }
  }
  const listed = await listAgents("x", { prefix: "conv-", after: null, limit: 10, readOnly: true, signal });
  const written: Date = listed[0]!.writtenAt;
  const id: string = listed[0]!.agentId;
  const expired = await expireAgents("x", { idleMs: 1000, dryRun: true, limit: 5 });
  // @ts-expect-error expireAgents needs idleMs
  await expireAgents("x", {});
  const deleted: number | null = await deleteAgent("x", "id", { ifVersion: 3, busyTimeoutMs: 0 });
  const text: string = encodeState({ a: 1, d: new Date() });
  const decoded: S = decodeState<S>(text);
  const patch: MergePatch<S> = { bytes: new Uint8Array(1), big: 2n, tags: new Set(["x"]), job: { note: "n" } };
  const options: OpenOptions<S> = { maxValueBytes: 1024, storeMaxValueBytes: 2048, readOnly: false, serverTimeoutMs: 5, maxConnections: 2, changeLog: false };
  void [merged, v, w, at, back, n, stop, cap, path, open, count, written, id, expired, deleted, decoded, patch, options];
}
`;

test('index.d.ts, as strict TypeScript sees it: what the package takes checks, and what it refuses is an error', () => {
  const ts = require(path.join(here, 'node_modules', 'typescript'));
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'agent-state-types-'));
  try {
    const file = path.join(dir, 'cases.ts');
    fs.writeFileSync(file, TYPING_CASES);
    const config = ts.getParsedCommandLineOfConfigFile(path.join(here, 'tsconfig.json'), {}, {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic(d) {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    });
    const program = ts.createProgram([file], {
      ...config.options,
      noEmit: true,
      rootDir: undefined,
      outDir: undefined,
      paths: { 'agent-state': [path.join(here, 'index.d.ts')] },
    });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file ? `${path.basename(d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '';
      return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    assert.deepEqual(problems, []);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
