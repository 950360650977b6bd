#!/usr/bin/env node
// skua-waypoint: Istio's ambient L7 proxy (see src/main.ts). Needs Node >= 24 (type stripping).
import { enableCompileCache } from 'node:module';

// As skua-proxy's bin: with the compile cache warm, type stripping's compiler (~20 MB) never loads (issue 13).
enableCompileCache();
await import('../src/main.ts');
