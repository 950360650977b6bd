// Preloaded (--import) into every fuzzing process: registers the loader that hands Jazzer.js plain
// JavaScript for our .ts modules, so its ESM instrumentation (coverage counters, compare hooks) sees them.
import { register } from 'node:module';

register('./ts-loader.mjs', import.meta.url);
