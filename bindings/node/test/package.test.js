'use strict';
// The npm package as it ships: its version is the workspace's (Cargo.toml's [workspace.package],
// the one version of everything), `files` is what `npm pack` puts in the tarball (the
// JavaScript, its types, the prebuilt addon, README.md and LICENSE, nothing else), and nothing
// runs at install time (the addon is prebuilt: installing needs no compiler and no cargo).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const here = path.resolve(__dirname, '..');
const root = path.resolve(here, '..', '..');
const pkg = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8'));
const lock = JSON.parse(fs.readFileSync(path.join(here, 'package-lock.json'), 'utf8'));
const ADDON = 'agent_state.linux-x64-gnu.node';

function workspaceVersion() {
  const text = fs.readFileSync(path.join(root, 'Cargo.toml'), 'utf8');
  const section = text.split(/^\[/m).find((part) => part.startsWith('workspace.package]'));
  assert.ok(section, 'Cargo.toml has a [workspace.package] section');
  const match = /^version\s*=\s*"([^"]+)"/m.exec(section);
  assert.ok(match, '[workspace.package] has a version');
  return match[1];
}

test("package.json's version is the workspace's, and so is package-lock.json's", () => {
  const version = workspaceVersion();
  assert.equal(pkg.version, version, `bindings/node/package.json says ${pkg.version}, Cargo.toml's [workspace.package] ${version}`);
  assert.equal(lock.version, version, 'package-lock.json (npm install --package-lock-only updates it)');
  assert.equal(lock.packages[''].version, version);
  assert.equal(lock.name, pkg.name);
});

test('package.json: the name, entry points, platform and license', () => {
  assert.equal(pkg.name, 'agent-state');
  assert.equal(pkg.main, 'index.js');
  assert.equal(pkg.types, 'index.d.ts');
  assert.equal(pkg.license, 'MIT');
  assert.deepEqual(pkg.os, ['linux']);
  assert.deepEqual(pkg.cpu, ['x64']);
  assert.equal(pkg.engines.node, '>=20');
  assert.deepEqual(pkg.exports['.'], { types: './index.d.ts', default: './index.js' });
  assert.ok(fs.existsSync(path.join(here, pkg.main)));
  assert.ok(fs.existsSync(path.join(here, pkg.types)));
  // The package's LICENSE is the repository's.
  assert.equal(fs.readFileSync(path.join(here, 'LICENSE'), 'utf8'), fs.readFileSync(path.join(root, 'LICENSE'), 'utf8'));
});

test('nothing runs at install time, and nothing is needed at run time but the package', () => {
  const installTime = ['preinstall', 'install', 'postinstall', 'prepublish', 'preprepare', 'prepare', 'postprepare'];
  for (const script of installTime) {
    assert.equal((pkg.scripts || {})[script], undefined, `package.json has a ${script} script`);
  }
  assert.notEqual(pkg.gypfile, true);
  assert.ok(!fs.existsSync(path.join(here, 'binding.gyp')), 'a binding.gyp makes npm run node-gyp at install');
  assert.deepEqual(pkg.dependencies || {}, {}, 'the package has no run-time dependencies');
});

test('the devDependencies are pinned to exact versions, as package-lock.json has them', () => {
  const dev = pkg.devDependencies || {};
  assert.ok(Object.keys(dev).includes('typescript') && Object.keys(dev).includes('@types/node'));
  for (const [name, version] of Object.entries(dev)) {
    assert.match(version, /^\d+\.\d+\.\d+$/, `${name}: an exact version, not a range`);
    assert.equal(lock.packages[`node_modules/${name}`].version, version, `package-lock.json's ${name}`);
  }
  assert.deepEqual(lock.packages[''].devDependencies, dev);
});

test("`files` is what npm pack puts in the tarball: the JavaScript, its types, the addon, README.md and LICENSE", () => {
  const optional = new Set(['README.md']);
  const want = ['index.js', 'index.d.ts', 'lib/', ADDON, 'README.md', 'LICENSE'];
  assert.deepEqual([...pkg.files].sort(), [...want].sort());
  assert.ok(
    fs.existsSync(path.join(here, ADDON)),
    `${ADDON} is missing: bash bindings/node/build.sh builds it (run-tests.sh does)`,
  );
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: here,
    encoding: 'utf8',
    env: { ...process.env, npm_config_loglevel: 'error', npm_config_update_notifier: 'false' },
  });
  const [packed] = JSON.parse(out);
  assert.equal(packed.name, 'agent-state');
  assert.equal(packed.version, pkg.version);
  assert.equal(packed.filename, `agent-state-${pkg.version}.tgz`);
  const listed = packed.files.map((f) => f.path).sort();
  // What the `files` entries name on disk (npm always adds package.json).
  const expected = ['package.json'];
  for (const entry of pkg.files) {
    const full = path.join(here, entry);
    if (entry.endsWith('/')) {
      for (const file of fs.readdirSync(full, { recursive: true })) {
        if (fs.statSync(path.join(full, file)).isFile()) expected.push(path.posix.join(entry, file.split(path.sep).join('/')));
      }
    } else if (fs.existsSync(full)) {
      expected.push(entry);
    } else {
      assert.ok(optional.has(entry), `${entry} is listed in files but missing`);
    }
  }
  assert.deepEqual(listed, expected.sort());
  assert.ok(listed.some((f) => f.startsWith('lib/') && f.endsWith('.js')));
  // Nothing of the checkout's development files.
  for (const file of listed) assert.doesNotMatch(file, /^(test|examples|build|node_modules)\/|tsconfig|\.sh$|\.tgz$/);
});
