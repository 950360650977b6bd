/**
 * Another build of skua-proxy to compare with the working tree: a git ref's packages/proxy, extracted
 * (lib/builds.ts does it for `./dev bench --ref` too: bin, sources, this checkout's node_modules).
 */
export { extractRef as skuaEntryForRef } from './builds.ts';
