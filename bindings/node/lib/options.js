'use strict';
// Open options: the JavaScript names (camelCase, as in `{ agentId, busyTimeoutMs }`) of the
// library's options, which the core checks (an unknown name or a wrong type is an
// InvalidArgumentError naming it). The option list lives in one place, the library's surface
// description (include/agent_state_surface.json); test/surface.test.js checks that index.d.ts
// declares each of them.

function snake(name) {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function convert(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const out = {};
  for (const [key, member] of Object.entries(value)) {
    if (member !== undefined) out[snake(key)] = convert(member);
  }
  return out;
}

// The options of a handle, as the core's JSON (the JavaScript-only ones taken out before).
function nativeOptions(options) {
  return convert(options);
}

// The options of the store-wide functions (list, delete, expire).
function storeOptions(options) {
  return convert(options);
}

module.exports = { nativeOptions, storeOptions, snake };
