'use strict';
// Loads the addon: the prebuilt one inside the package (agent_state.linux-x64-gnu.node, which
// build.sh copies from Cargo's target/release), or the one AGENT_STATE_NODE_ADDON names.
const path = require('path');
const fs = require('fs');

function load() {
  const named = process.env.AGENT_STATE_NODE_ADDON;
  if (named) return require(path.resolve(named));
  const platform = `${process.platform}-${process.arch}`;
  const file = path.join(__dirname, '..', `agent_state.${platform}-gnu.node`);
  if (!fs.existsSync(file)) {
    throw new Error(
      `agent-state: no prebuilt addon for ${platform} (looked for ${file}); this package ships ` +
        'linux-x64-gnu. From a checkout, `bash bindings/node/build.sh` builds it.',
    );
  }
  return require(file);
}

module.exports = load();
