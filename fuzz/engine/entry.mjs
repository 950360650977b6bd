// The module Jazzer.js loads (it only takes .js/.mjs/.cjs): re-exports the target named by
// SKUA_FUZZ_TARGET (an absolute path to fuzz/targets/<name>.ts).
const target = process.env.SKUA_FUZZ_TARGET;
if (!target) throw new Error('SKUA_FUZZ_TARGET is not set');
const mod = await import(target);
export const fuzz = mod.fuzz;
