#!/usr/bin/env node
// skua-ztunnel: the per-node L4 proxy of Istio's ambient mode (see src/main.ts). Needs Node >= 24 (type stripping).
import { enableCompileCache } from 'node:module';

// As skua-proxy does (issue 13): with the compile cache warm, type stripping's compiler (amaro,
// ~20 MB of anonymous memory for the life of the process) never loads. NODE_COMPILE_CACHE picks the
// directory (default <tmpdir>/node-compile-cache); one that cannot be written is skipped.
enableCompileCache();
await import('../src/main.ts');
